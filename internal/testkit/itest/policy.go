package itest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// SourceOf names the input an output came from, by its lineage headers.
func SourceOf(r *kgo.Record) (string, bool) {
	in, ok := check.Lineage(r)
	return in.String(), ok
}

// HeaderValue returns the value of r's header key, or "" without one.
func HeaderValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// CommittedOffsets returns group's committed offsets for topic by partition.
func (tg *Target) CommittedOffsets(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	return tg.Committed(t, group, topic)
}
