package txn

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStopAt: a session with a stop never returns a record at or past
// it, commits exactly the stop, and after an abort reads the records
// before the stop again (and still none past it).
func TestStopAt(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) {
			c := newCluster(t)
			c.createTopic(t, "in", 1)
			c.produce(t, "in", 10)
			f := c.session(t, "stop-"+string(g), "stop-"+string(g), []string{"in"}, func(o *Options) {
				o.Guarantee = g
				o.StopAt = map[string]map[int32]int64{"in": {0: 6}}
			})
			f.init(t)
			first := pollUntilQuiet(t, f)
			if len(first) != 6 || first[5].Offset != 5 {
				t.Fatalf("polled %d records up to %v, want offsets 0-5", len(first), offsetsOf(first))
			}
			// An abort rewinds: the same six again, nothing past them.
			if err := f.Begin(context.Background()); err != nil {
				t.Fatal(err)
			}
			if committed, err := f.End(context.Background(), 6, ReasonInjected); err != nil || committed {
				t.Fatalf("End(abort) = %v, %v", committed, err)
			}
			again := pollUntilQuiet(t, f)
			if len(again) != 6 || again[0].Offset != 0 {
				t.Fatalf("after the abort polled %v, want offsets 0-5 again", offsetsOf(again))
			}
			if err := f.Begin(context.Background()); err != nil {
				t.Fatal(err)
			}
			if committed, err := f.End(context.Background(), 6, ""); err != nil || !committed {
				t.Fatalf("End = %v, %v", committed, err)
			}
			if got := c.committedOffsets("stop-"+string(g), "in"); got != 6 {
				t.Errorf("committed %d, want the stop, 6", got)
			}
			if more := pollUntilQuiet(t, f); len(more) != 0 {
				t.Errorf("after the commit polled %v, want nothing", offsetsOf(more))
			}
		})
	}
}

// pollUntilQuiet polls until a poll of a second returns nothing.
func pollUntilQuiet(t *testing.T, f *fixture) []*kgo.Record {
	t.Helper()
	var rs []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := f.Poll(ctx, 100)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { rs, n = append(rs, r), n+1 })
		if n == 0 && len(rs) > 0 {
			return rs
		}
		if n == 0 && time.Until(deadline) < 25*time.Second {
			return rs
		}
	}
	return rs
}

func offsetsOf(rs []*kgo.Record) []int64 {
	var os []int64
	for _, r := range rs {
		os = append(os, r.Offset)
	}
	return os
}
