package state

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"
)

// A journal's Undo leaves every key as the transaction had it before the
// record ran: a key first written by the record is gone (its committed
// value shows again, and it has no changelog record), a key written
// earlier in the transaction has that earlier value, a deletion is
// undone. Marked writes stand, and Mark returns what they add to the
// changelog: a key written twice counts once, at its last value.
func TestJournalUndo(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	e.txn(m, true, func(tx *Txn) { put(t, store(t, tx, "counts", 0), "committed", "c0") })

	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	j := &Journal{}
	js, err := j.Store(tx, "counts", 0)
	if err != nil {
		t.Fatal(err)
	}
	put(t, js, "earlier", "e1") // a record that succeeds
	if got := j.Mark(); got != int64(len("earlier")+8+len("e1")) {
		t.Errorf("Mark after one write = %d, want %d", got, len("earlier")+8+len("e1"))
	}
	put(t, js, "earlier", "e2-longer")
	put(t, js, "fresh", "f1")
	put(t, js, "committed", "c1")
	if err := js.Delete([]byte("committed")); err != nil {
		t.Fatal(err)
	}
	j.Undo() // the record failed

	get := func(k string) string {
		t.Helper()
		v, ok, err := js.Get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ""
		}
		return string(v)
	}
	for k, want := range map[string]string{"earlier": "e1", "fresh": "", "committed": "c0"} {
		if got := get(k); got != want {
			t.Errorf("after Undo %q = %q, want %q", k, got, want)
		}
	}

	put(t, js, "earlier", "e3")
	put(t, js, "earlier", "e4-four")
	if got, want := j.Mark(), int64(len("e4-four")-len("e1")); got != want {
		t.Errorf("Mark after rewriting a key = %d, want %d (the growth of its one record)", got, want)
	}
	var keys []string
	for _, r := range tx.Records() {
		keys = append(keys, string(r.Key)+"="+string(r.Value[8:])) // past the expiry
	}
	sort.Strings(keys)
	if got := strings.Join(keys, " "); got != "earlier=e4-four" {
		t.Errorf("changelog records %q, want only earlier=e4-four", got)
	}
	tx.Abort()
}

// A write whose changelog record the topic could not take is refused with
// a *TooLargeError naming the topic, and writes nothing.
func TestJournalTooLarge(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	topic := ChangelogTopic(e.group, "counts")
	j := &Journal{MaxRecordBytes: func(tp string) int {
		if tp == topic {
			return 1000
		}
		return 0
	}}
	js, err := j.Store(tx, "counts", 0)
	if err != nil {
		t.Fatal(err)
	}
	put(t, js, "small", strings.Repeat("x", 800))
	err = js.Put([]byte("big"), []byte(strings.Repeat("x", 1000)), time.Time{})
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Topic != topic || tl.Limit != 1000 {
		t.Fatalf("Put of 1,003 bytes under a 1,000-byte limit: %v, want a *TooLargeError for %s", err, topic)
	}
	if _, ok, _ := js.Get([]byte("big")); ok {
		t.Error("the refused write was written")
	}
	if len(j.ops) != 1 {
		t.Errorf("journal holds %d writes, want the one accepted", len(j.ops))
	}
}
