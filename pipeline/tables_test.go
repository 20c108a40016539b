package pipeline

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/record"
)

// gatedTable is a Table whose Restore waits for open, noting the
// partitions it keeps; a record of a partition it does not keep is a
// violation of the loop's promise.
type gatedTable struct {
	open chan struct{}

	mu       sync.Mutex
	calls    int
	parts    []int32
	restored bool
}

func (g *gatedTable) Restore(ctx context.Context, parts []int32) error {
	g.mu.Lock()
	g.calls++
	g.restored = false
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	g.parts, g.restored = slices.Clone(parts), true
	g.mu.Unlock()
	return nil
}

func (g *gatedTable) Status() any { return map[string]int{"calls": g.count()} }

func (g *gatedTable) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// holds reports whether the table was restored for p.
func (g *gatedTable) holds(p int32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.restored && slices.Contains(g.parts, p)
}

// A join's table is restored for the input partitions assigned before
// any of their records runs, the instance is not ready meanwhile, and a
// rebalance restores it again; every record is written once.
func TestTablesRestoredBeforeRecords(t *testing.T) {
	e := newMemEnv(t)
	tb := &gatedTable{open: make(chan struct{})}
	var mu sync.Mutex
	var early []record.Source
	fn := func(_ context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if !tb.holds(src.Partition) {
			mu.Lock()
			early = append(early, src)
			mu.Unlock()
		}
		return append(out, r), nil
	}
	e.produce(60, 6)
	run := e.start("g", "t1", loopChain(t, fn), Options{Tables: []Table{tb}, Lineage: true, MaxRecordsPerTxn: 20})
	eventually(t, 10*time.Second, "a restore begun", run, func() bool { return tb.count() > 0 })
	time.Sleep(200 * time.Millisecond) // records polled meanwhile must wait
	if run.p.Ready() || run.p.Stats().Commits > 0 {
		t.Errorf("while the table restores: ready %v, %d commits", run.p.Ready(), run.p.Stats().Commits)
	}
	if st := run.p.Status(); !st.Restoring || len(st.Tables) != 1 {
		t.Errorf("/status while restoring: restoring %v, tables %v", st.Restoring, st.Tables)
	}
	close(tb.open)
	eventually(t, 20*time.Second, "every input committed", run, func() bool { return e.caughtUp("g") })
	if !slices.Equal(tb.parts, []int32{0, 1, 2}) {
		t.Errorf("restored for %v, want every input partition", tb.parts)
	}
	calls := tb.count()
	run.s.(*memkafka.Session).Rebalance()
	e.produce(30, 6)
	eventually(t, 10*time.Second, "a restore after the rebalance", run, func() bool { return tb.count() > calls })
	eventually(t, 20*time.Second, "every input committed", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	if len(early) > 0 {
		t.Errorf("%d records ran before their table partition was restored, e.g. %v", len(early), early[0])
	}
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
}
