package itest

import (
	"testing"
	"time"
)

// GroupClientIDs returns the client ID of each member of group, as the
// group's coordinator describes it.
func (tg *Target) GroupClientIDs(t testing.TB, group string) []string {
	t.Helper()
	described, err := tg.Admin(t).DescribeGroups(Context(t, 30*time.Second), group)
	if err != nil {
		t.Fatalf("describing group %s: %v", group, err)
	}
	var ids []string
	for _, m := range described[group].Members {
		ids = append(ids, m.ClientID)
	}
	return ids
}
