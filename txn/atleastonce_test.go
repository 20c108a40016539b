package txn

import (
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func atLeastOnceMode(o *Options) { o.Guarantee = AtLeastOnce }

// At least once: a committed batch's outputs are visible at once (no
// transaction) and its offsets committed; an aborted batch's outputs stay
// written, and its input is polled again from the batch's first offsets,
// so it is written twice, never lost; a commit moves the offsets past it.
func TestAtLeastOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 2)
	c.createTopic(t, "out", 1)
	c.produce(t, "in", 20)
	f := c.session(t, "g", "alo", []string{"in"}, atLeastOnceMode)
	f.init(t)
	first := f.pollN(t, 20)
	f.begin(t)
	f.copyTo("out", first)
	if !f.end(t, len(first), "") {
		t.Fatal("the first batch did not commit")
	}
	if got := c.committedOffsets("g", "in"); got != 20 {
		t.Errorf("committed %d in all after the first batch, want 20", got)
	}
	if c := testutil.ToFloat64(f.m.Committed); f.InTxn() || c != 1 {
		t.Errorf("after a commit: in a batch %v, %v commits counted", f.InTxn(), c)
	}

	c.produce(t, "in", 10)
	batch := f.pollN(t, 10)
	f.begin(t)
	f.copyTo("out", batch)
	if f.end(t, len(batch), ReasonInjected) {
		t.Fatal("an aborted batch committed")
	}
	if got := c.committedOffsets("g", "in"); got != 20 {
		t.Errorf("committed %d after an abort, want still 20", got)
	}
	again := f.pollN(t, 10)
	var a, b []string
	for i := range batch {
		a = append(a, string(batch[i].Value))
		b = append(b, string(again[i].Value))
	}
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Errorf("after the abort polled %v, want the aborted batch %v again", b, a)
	}
	f.begin(t)
	f.copyTo("out", again)
	if !f.end(t, len(again), "") {
		t.Fatal("the retried batch did not commit")
	}
	if got := c.committedOffsets("g", "in"); got != 30 {
		t.Errorf("committed %d in all, want 30", got)
	}
	// No transactions: read_uncommitted and read_committed see the same
	// 40 outputs, the aborted batch's 10 twice.
	committed, dirty := c.readAll(t, "out", true), c.readAll(t, "out", false)
	if len(committed) != 40 || len(dirty) != 40 {
		t.Fatalf("out holds %d (read_committed) and %d (read_uncommitted) records, want 40 each", len(committed), len(dirty))
	}
	seen := map[string]int{}
	for _, v := range committed {
		seen[v]++
	}
	// Values repeat: the first 20 are v0..v19, the next 10 v0..v9. So
	// v0..v9 appear once from the first batch and twice from the
	// aborted one, v10..v19 once.
	for i := range 20 {
		want := 1
		if i < 10 {
			want = 3
		}
		if v := "out-v" + strconv.Itoa(i); seen[v] != want {
			t.Errorf("%s written %d times, want %d", v, seen[v], want)
		}
	}
	if f.aborted(ReasonInjected) != 1 {
		t.Errorf("aborted{injected} = %v, want 1", f.aborted(ReasonInjected))
	}
}
