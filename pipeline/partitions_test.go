package pipeline

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// gaugeOf reads one partition's gauge, and whether its series exists
// (without creating it).
func gaugeOf(g *prometheus.GaugeVec, topic string, partition int32) (float64, bool) {
	ch := make(chan prometheus.Metric, 256)
	g.Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		l := map[string]string{}
		for _, lp := range d.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["topic"] == topic && l["partition"] == strconv.Itoa(int(partition)) {
			return d.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// seriesOf returns how many series g has.
func seriesOf(g *prometheus.GaugeVec) int { return testutil.CollectAndCount(g) }

// The tracker's arithmetic: lag is last stable minus committed (from the
// log start before any commit), never negative, unknown without a last
// stable offset; unstable is log end minus last stable; a revoked
// partition's series are deleted.
func TestPartitionsTracker(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	ps := newPartitions(m)
	ps.assign(map[string][]int32{"in": {0, 1}})
	if st, total := ps.snapshot(); len(st) != 2 || total != 0 || st[0].Position != -1 || st[1].Committed != -1 {
		t.Fatalf("after assign: %+v, %d", st, total)
	}
	if n := seriesOf(m.ConsumerLag); n != 0 {
		t.Errorf("%d lag series before any offset is known, want 0", n)
	}
	ps.ends(map[string]map[int32]txn.Ends{"in": {0: {LogStart: 5, LogEnd: 100, LastStable: 90}, 1: {LogStart: 0, LogEnd: 7, LastStable: 7}},
		"other": {0: {LogEnd: 3, LastStable: 3}}})
	st, total := ps.snapshot()
	// No commit yet: lag counts from the log start.
	if st[0].Lag != 85 || st[0].Unstable != 10 || st[1].Lag != 7 || st[1].Unstable != 0 || total != 92 {
		t.Errorf("before a commit: %+v, total %d; want lags 85 and 7, unstable 10 and 0", st, total)
	}
	ps.committed(map[string]map[int32]int64{"in": {0: 60, 1: 7}, "other": {0: 1}})
	st, total = ps.snapshot()
	if st[0].Lag != 30 || st[0].Position != 60 || st[1].Lag != 0 || total != 30 {
		t.Errorf("after a commit: %+v, total %d; want lags 30 and 0, position 60", st, total)
	}
	for _, c := range []struct {
		g    *prometheus.GaugeVec
		p    int32
		want float64
	}{{m.ConsumerLag, 0, 30}, {m.ConsumerLag, 1, 0}, {m.CommittedOffset, 0, 60}, {m.LogEndOffset, 0, 100},
		{m.LastStableOffset, 0, 90}, {m.UnstableRecords, 0, 10}, {m.UnstableRecords, 1, 0}} {
		if got, ok := gaugeOf(c.g, "in", c.p); !ok || got != c.want {
			t.Errorf("gauge for in/%d = %v (%v), want %v", c.p, got, ok, c.want)
		}
	}
	// A committed offset past a stale last stable offset is no negative lag.
	ps.committed(map[string]map[int32]int64{"in": {0: 95}})
	if st, _ := ps.snapshot(); st[0].Lag != 0 {
		t.Errorf("committed past the last stable offset: lag %d, want 0", st[0].Lag)
	}
	// Partition 1 is revoked: its series go, partition 0's stay.
	ps.assign(map[string][]int32{"in": {0}})
	if st, _ := ps.snapshot(); len(st) != 1 || st[0].Partition != 0 || st[0].Committed != 95 {
		t.Errorf("after revoking in/1: %+v", st)
	}
	for _, g := range []*prometheus.GaugeVec{m.ConsumerLag, m.CommittedOffset, m.LogEndOffset, m.LastStableOffset, m.UnstableRecords} {
		if n := seriesOf(g); n != 1 {
			t.Errorf("%d series after a revoke, want 1 (in/0)", n)
		}
	}
	if got := ps.topics(); len(got) != 1 || got[0] != "in" {
		t.Errorf("topics() = %v", got)
	}
	ps.assign(nil)
	if n := seriesOf(m.ConsumerLag) + seriesOf(m.LogEndOffset); n != 0 {
		t.Errorf("%d series with nothing assigned", n)
	}
}

// produceTransactions writes n records to topic in transactions of per
// records each, committed, with a transactional producer: every
// transaction leaves a commit marker that takes an offset.
func (e *loopEnv) produceTransactions(n, per int) {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.TransactionalID("upstream-"+strconv.Itoa(len(e.inputs))),
		kgo.DefaultProduceTopic(e.in))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for done := 0; done < n; done += per {
		if err := cl.BeginTransaction(); err != nil {
			e.t.Fatal(err)
		}
		for i := done; i < min(done+per, n); i++ {
			k, v := loopValue(len(e.inputs), 10)
			r := &kgo.Record{Key: []byte(k), Value: []byte(v)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				e.t.Fatal(err)
			}
			e.inputs = append(e.inputs, r)
			e.byValue[v] = r
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			e.t.Fatal(err)
		}
	}
}

// stableEnds returns the input's last stable offset per partition, as kadm
// reports it.
func (e *loopEnv) stableEnds() map[int32]int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := e.adm.ListCommittedOffsets(ctx, e.in)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// On transactional input, whose commit markers take offsets, a caught-up
// processor commits past the markers: the group's committed offsets equal
// the last stable offsets, its lag gauges read 0 on every partition, and
// the gauges agree with kadm's reading. Only data records count as
// consumed.
func TestLagTransactionalInputCaughtUp(t *testing.T) {
	e := newLoopEnv(t)
	e.produceTransactions(300, 7)
	run := e.start("g", "g-a", loopChain(t, passThrough), Options{Lineage: true, EndOffsetsInterval: 100 * time.Millisecond})
	stable := e.stableEnds()
	eventually(t, 20*time.Second, "the group to commit up to the last stable offsets", run, func() bool {
		c := e.committedOffsets("g")
		for p, s := range stable {
			if c[p] != s {
				return false
			}
		}
		return true
	})
	eventually(t, 10*time.Second, "the lag to read 0", run, func() bool { return run.p.Stats().Lag == 0 })
	for p, s := range stable {
		if got, ok := gaugeOf(run.pm.ConsumerLag, e.in, p); !ok || got != 0 {
			t.Errorf("processor_consumer_lag_records{partition=%d} = %v (%v), want 0", p, got, ok)
		}
		if got, _ := gaugeOf(run.pm.CommittedOffset, e.in, p); got != float64(s) {
			t.Errorf("processor_committed_offset{partition=%d} = %v, want the last stable offset %d", p, got, s)
		}
		if got, _ := gaugeOf(run.pm.LastStableOffset, e.in, p); got != float64(s) {
			t.Errorf("processor_last_stable_offset{partition=%d} = %v, want %d", p, got, s)
		}
	}
	run.stop(t, 10*time.Second)
	if st := run.p.Stats(); st.Consumed != 300 || st.Produced != 300 {
		t.Errorf("Stats() = %+v, want 300 consumed and produced (markers are not records)", st)
	}
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
}

// While behind, every partition's lag gauge is the last stable offset
// minus the group's committed offset, as kadm reads them independently;
// an upstream transaction left open shows as unstable records, refreshed
// while the processor has nothing to read; /status reports the same.
func TestLagWhileBehindAndUnstable(t *testing.T) {
	e := newLoopEnv(t)
	const n = 600
	e.produce(n, 30)
	held, release := make(chan struct{}), make(chan struct{})
	var seen int
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if seen++; seen == 101 {
			close(held)
			<-release // hold the loop with a transaction open
		}
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{CommitInterval: 50 * time.Millisecond, MaxRecordsPerTxn: 50, EndOffsetsInterval: 100 * time.Millisecond})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	// The transactions before record 101 committed (at least two: 50
	// records at most each, fewer when the commit interval cuts them), the
	// one open holds the loop. Kafka's offsets are read once it holds, so
	// that no commit moves them after.
	eventually(t, 20*time.Second, "the loop to hold record 101", run, func() bool {
		select {
		case <-held:
			return true
		default:
			return false
		}
	})
	committed := e.committedOffsets("g")
	stable := e.stableEnds()
	eventually(t, 5*time.Second, "the gauges to match kadm", run, func() bool {
		for p := range stable {
			want := float64(stable[p] - committed[p])
			if got, ok := gaugeOf(run.pm.ConsumerLag, e.in, p); !ok || got != want {
				return false
			}
		}
		return true
	})
	var want int64
	for p := range stable {
		want += stable[p] - committed[p]
	}
	if want <= 0 || want >= n {
		t.Fatalf("independent lag %d; the test needs a backlog", want)
	}
	s := run.p.Status()
	if s.Lag != want || len(s.Partitions) != loopPartitions || s.OpenTransaction == nil || s.Commits < 2 {
		t.Errorf("Status() = lag %d, %d partitions, open %v, %d commits; want lag %d, %d partitions, an open transaction",
			s.Lag, len(s.Partitions), s.OpenTransaction, s.Commits, want, loopPartitions)
	}

	// An upstream transaction left open: its records are not readable,
	// the loop is held, and yet the gauges show them within a refresh.
	up, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.TransactionalID("upstream-open"), kgo.DefaultProduceTopic(e.in),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if err := up.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 25 {
		if err := up.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("open-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "25 unstable records on partition 1", run, func() bool {
		got, ok := gaugeOf(run.pm.UnstableRecords, e.in, 1)
		return ok && got == 25
	})
	if got, _ := gaugeOf(run.pm.UnstableRecords, e.in, 0); got != 0 {
		t.Errorf("unstable records on partition 0 = %v, want 0", got)
	}
	if err := up.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	close(release)
	eventually(t, 20*time.Second, "the lag to reach 0", run, func() bool { return run.p.Stats().Lag == 0 })
	eventually(t, 5*time.Second, "no unstable records", run, func() bool {
		got, _ := gaugeOf(run.pm.UnstableRecords, e.in, 1)
		return got == 0
	})
	run.stop(t, 10*time.Second)
}

// When a second member joins, the partitions it takes are revoked from the
// first: their series vanish there and appear at the second, each
// partition reported by exactly one member.
func TestLagSeriesFollowTheAssignment(t *testing.T) {
	e := newLoopEnv(t)
	e.produce(300, 30)
	a := e.start("g", "g-a", loopChain(t, passThrough), Options{EndOffsetsInterval: 100 * time.Millisecond})
	eventually(t, 20*time.Second, "a to report every partition", a, func() bool { return seriesOf(a.pm.ConsumerLag) == loopPartitions })
	b := e.start("g", "g-b", loopChain(t, passThrough), Options{EndOffsetsInterval: 100 * time.Millisecond})
	eventually(t, 30*time.Second, "the partitions to be split", b, func() bool {
		na, nb := seriesOf(a.pm.ConsumerLag), seriesOf(b.pm.ConsumerLag)
		return na > 0 && nb > 0 && na+nb == loopPartitions
	})
	sa, sb := a.p.Status(), b.p.Status()
	seen := map[int32]int{}
	for _, p := range append(sa.Partitions, sb.Partitions...) {
		seen[p.Partition]++
	}
	for p := range int32(loopPartitions) {
		if seen[p] != 1 {
			t.Errorf("partition %d reported by %d members, want 1", p, seen[p])
		}
	}
	if sa.Generation == sb.Generation && sa.MemberID == sb.MemberID {
		t.Errorf("both members report member %q", sa.MemberID)
	}
	b.stop(t, 10*time.Second)
	a.stop(t, 10*time.Second)
}
