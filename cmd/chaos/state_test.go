package main

import (
	"strings"
	"testing"
)

// The restores are summed from the processors' own log lines: a store's
// "state restored" and a join table's "table restored", where a table
// partition read from the topic's start with rows counts as rebuilt (a
// wiped or new state directory has no checkpoint), one read from a
// checkpoint does not, and a line cut short by a SIGKILL is skipped.
func TestRestoresCountsStoresAndTables(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"INFO","msg":"state restored","store":"aggregate","partition":0,"records":40,"rebuilt":true}`,
		`{"level":"INFO","msg":"state restored","store":"aggregate","partition":1,"records":3,"rebuilt":false}`,
		`{"level":"INFO","msg":"table restored","table":"t","partition":2,"rows":125,"from":0,"to":131,"rebuilt":false}`,
		`{"level":"INFO","msg":"table restored","table":"t","partition":3,"rows":4,"from":131,"to":135,"rebuilt":false}`,
		`{"level":"INFO","msg":"table restored","table":"t","partition":4,"rows":0,"from":0,"to":0,"rebuilt":false}`,
		`{"level":"INFO","msg":"table restored","table":"t","partition":5,"rows":9,"from":17,"to":26,"rebuilt":true}`,
		`{"level":"INFO","msg":"progress","committed":12}`,
		`{"level":"INFO","msg":"table restored","table":"t","parti`,
	}, "\n")
	var s restores
	if err := s.add(strings.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	want := restores{partitions: 6, rebuilt: 3, records: 40 + 3 + 125 + 4 + 9}
	if s != want {
		t.Errorf("restores %+v, want %+v", s, want)
	}
}
