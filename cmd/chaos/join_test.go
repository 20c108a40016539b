package main

import (
	"encoding/json"
	"slices"
	"testing"
)

// eoscheck judges a join run with -check join on the run's table; an
// inner join filters inputs, so it is not judged one to one.
func TestJoinArgs(t *testing.T) {
	for _, c := range []struct {
		typ      string
		oneToOne bool
	}{{"left", true}, {"inner", false}} {
		d := &driver{o: options{joinType: c.typ, transforms: []string{"jq", "join"}}, joinTable: "chaos-table-x"}
		args := d.joinArgs()
		want := []string{"-check", "join", "-join-table", "chaos-table-x", "-join-into", joinInto, "-join-type", c.typ}
		if !slices.Equal(args[:len(want)], want) {
			t.Errorf("%s: eoscheck args %q, want %q first", c.typ, args, want)
		}
		if got := !slices.Contains(args, "-one-to-one=false"); got != c.oneToOne {
			t.Errorf("%s: judged one to one %v, want %v (%q)", c.typ, got, c.oneToOne, args)
		}
	}
}

// Every table row is a version of its own, naming its key as the
// input's value does: text keys by their text, binary ones by their
// label.
func TestTableRows(t *testing.T) {
	for _, keys := range []string{keysText, keysBinary} {
		o := options{keys: keys}
		seen := map[string]bool{}
		for j := range 8 {
			key, label := o.keyNumber(j)
			var row struct {
				Key     string `json:"key"`
				Version int    `json:"version"`
			}
			b := o.tableRow(j, 100+j)
			if err := json.Unmarshal(b, &row); err != nil || row.Key != label || row.Version != 100+j {
				t.Errorf("%s key %d: row %s, want key %q version %d (%v)", keys, j, b, label, 100+j, err)
			}
			if seen[key] {
				t.Errorf("%s: key %d repeats key %q", keys, j, key)
			}
			seen[key] = true
		}
	}
	if key, _ := (options{keys: keysBinary}).keyNumber(5); key != string(binaryKey(5)) {
		t.Errorf("binary key 5 is %x, want the input's %x", key, binaryKey(5))
	}
}
