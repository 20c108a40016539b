package lag

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/itest"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// The per-partition gauges (processor_consumer_lag_records,
// processor_committed_offset, processor_log_end_offset,
// processor_last_stable_offset, processor_partition_unstable_records)
// against what Kafka itself reports: kadm on every target, and on the real
// broker also Kafka's own kafka-consumer-groups tool.
//
// The instances here are built by app.Prepare and Build, so the end offsets are
// refreshed every 5s (pipeline.Options.EndOffsetsInterval's default): the
// waits for the gauges to agree allow for that, with deadlines of their
// own.
//
// While behind, the processor is held on one record in its transform, for
// as long as the checks take: kafka-consumer-groups starts a JVM, which
// took over 30s a run on a loaded 2-core machine. The gate lets go only
// when the test opens it or the instance stops. The processor itself cuts
// a record that runs for half its transaction budget (pipeline's record
// limit: 4/5 of the transaction timeout, halved), so the transaction
// timeout is long enough for that limit to outlast the checks' own
// deadlines (lagHoldLimit); on kfake the test raises the longest session
// timeout a group may have (5 minutes) to Kafka's default (30 minutes),
// since the session timeout must be longer than the transaction timeout.

const (
	lagParts      = 3
	lagAgreeWait  = 20 * time.Second          // gauges to agree with Kafka: a 5s end-offset refresh plus slack for a loaded machine
	lagHoldWait   = 30 * time.Second          // the processor to reach the held record
	lagCatchUp    = 60 * time.Second          // the group to commit everything once let go
	lagTxnTimeout = 10 * time.Minute          // the processor's transaction timeout: its record limit must outlast the hold
	lagHoldLimit  = lagTxnTimeout * 4 / 5 / 2 // how long the processor lets the held record run
	lagToolWait   = 2 * time.Minute           // one kafka-consumer-groups run (JVM start; the first fetches its jars with mvn)
)

// While the processor is held behind on plain (non-transactional) input,
// and once it has caught up, its gauges agree with Kafka.
func TestLagAgreesWithKafkaPlainInput(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) { lagAgreesWithKafka(t, tg, false) })
}

// The same on transactional input, whose commit markers take offsets: a
// caught-up group has committed past the last marker, so its lag is 0 by
// our gauges and by Kafka's tool alike. While behind, an upstream
// transaction is also left open on partition 0, so that its high watermark
// and last stable offset differ.
func TestLagAgreesWithKafkaTransactionalInput(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) { lagAgreesWithKafka(t, tg, true) })
}

func lagAgreesWithKafka(t *testing.T, tg *itest.Target, transactional bool) {
	kind := "plain"
	if transactional {
		kind = "txn"
	}
	// 30 keys over 3 partitions, record i to partition i%3: each key stays
	// in one partition, so per-key order can be checked at the end.
	in := itest.Input{Topic: itest.Unique("lag-" + kind + "-in"), N: 600, Keys: 30}
	out, group := itest.Unique("lag-"+kind+"-out"), itest.Unique("lag-"+kind+"-group")
	tg.NewTopics(t, lagParts, in.Topic, out)
	if held := lagAgreeWait + lagToolWait; held >= lagHoldLimit {
		t.Fatalf("the checks while held may take %s, the processor cuts the held record after %s: raise lagTxnTimeout", held, lagHoldLimit)
	}
	if tg.Fake != nil {
		raiseMaxSessionTimeout(t, tg)
	}
	perTxn := 0
	if transactional {
		perTxn = 15 // 40 transactions, each with a commit marker on every partition
	}
	tg.ProduceLagInput(t, in, lagParts, perTxn)
	// Upstream commit markers are written after EndTransaction returns:
	// start from a settled input, whose end offsets no longer move.
	waitKafka(t, tg, lagAgreeWait, "the input's transactions to settle (last stable = log end)", group, in.Topic, nil, func(k map[int32]itest.KafkaOffsets) []string {
		var diffs []string
		for p, o := range k {
			if o.LastStable != o.LogEnd {
				diffs = append(diffs, fmt.Sprintf("p%d last stable %d log end %d", p, o.LastStable, o.LogEnd))
			}
		}
		return diffs
	})

	// Each partition has 200 records; transactions hold at most 40. The
	// gate holds the first record after every partition has had 50
	// through the transform and some of its records committed (as the
	// processor reports its committed offsets: an abort, or transactions
	// cut short, may take more records than 50 to get there).
	gate := newLagGate(lagParts, 50)
	defer gate.open()
	t.Cleanup(func() {
		if gate.cut.Load() && t.Failed() {
			t.Log("the processor cut the held record (its record limit) before the test let it go: the checks while behind took longer than the limit")
		}
	})
	inst := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
		Chain: gate.chain(t), MaxRecords: 40, TxnTimeout: lagTxnTimeout})
	gate.p.Store(inst.Pipeline)
	itest.WaitClosed(t, gate.entered, lagHoldWait, "the processor to reach the held record")
	held := time.Now()
	if c := inst.Pipeline.Stats().Commits; c == 0 {
		t.Fatalf("held with no transaction committed before; the test needs committed offsets (stats: %s)", itest.FmtStats(inst))
	}

	var up *kgo.Client
	if transactional {
		up = tg.OpenUpstreamTransaction(t, in.Topic, 0, 5, lagTxnTimeout)
	}

	// Behind: the gauges are Kafka's offsets, and the lag is last stable
	// minus committed.
	behind := waitGaugesAgree(t, tg, inst, group, in.Topic, "the gauges to agree with kadm while behind")
	var lag int64
	for p, o := range behind {
		if o.Committed < 0 {
			t.Errorf("p%d: the group has committed nothing while held; the gate should have waited for that", p)
		}
		lag += o.LastStable - max(o.Committed, 0)
	}
	if lag <= 0 || lag >= int64(in.N) {
		t.Fatalf("lag %d by kadm while held; the test needs a backlog (%v)", lag, behind)
	}
	if transactional && behind[0].LogEnd != behind[0].LastStable+5 {
		t.Fatalf("p0: log end %d, last stable %d while an upstream transaction of 5 records is open; want them 5 apart",
			behind[0].LogEnd, behind[0].LastStable)
	}
	checkStatus(t, inst, in.Topic, behind)
	if tg.Fake == nil {
		checkConsumerGroupsTool(t, tg, inst, group, in.Topic)
	}

	if up != nil {
		ctx := itest.Context(t, itest.ProduceTimeout)
		if err := up.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatalf("aborting the open upstream transaction: %v", err)
		}
	}
	if gate.cut.Load() {
		t.Fatalf("the processor cut the held record (its record limit) before the checks while behind ended, %s after it was held", time.Since(held).Round(time.Millisecond))
	}
	gate.open()

	// Caught up: the group committed up to the last stable offsets (past
	// the last marker on transactional input), and every gauge says so.
	waitKafka(t, tg, lagCatchUp, "the group to commit up to the last stable offsets", group, in.Topic, inst, func(k map[int32]itest.KafkaOffsets) []string {
		var diffs []string
		for p, o := range k {
			if o.Committed != o.LastStable || o.LastStable != o.LogEnd {
				diffs = append(diffs, fmt.Sprintf("p%d committed %d last stable %d log end %d", p, o.Committed, o.LastStable, o.LogEnd))
			}
		}
		return diffs
	})
	caught := waitGaugesAgree(t, tg, inst, group, in.Topic, "the gauges to agree with kadm once caught up")
	for p := range caught {
		if v, ok := partitionGauges(inst.PipelineMetrics.ConsumerLag, in.Topic)[p]; !ok || v != 0 {
			t.Errorf("processor_consumer_lag_records{partition=%d} = %v (series exists: %v) once caught up, want 0", p, v, ok)
		}
	}
	if s := inst.Pipeline.Status(); s.Lag != 0 {
		t.Errorf("Status().Lag = %d once caught up, want 0", s.Lag)
	}
	checkStatus(t, inst, in.Topic, caught)
	if tg.Fake == nil {
		rows := checkConsumerGroupsTool(t, tg, inst, group, in.Topic)
		for p, r := range rows {
			if r.lag != 0 {
				t.Errorf("kafka-consumer-groups: p%d LAG %d once caught up (%s input), want 0", p, r.lag, kind)
			}
		}
	}
	inst.Stop(t)
	itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
}

// When a second instance joins the group, the partitions it takes are
// revoked from the first: their series vanish there and appear at the
// second. Each instance's series are exactly its assignment as the broker
// describes it, so each partition is reported by exactly one instance.
func TestLagSeriesOfRevokedPartitionsVanish(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		const parts = 4
		in := itest.Input{Topic: itest.Unique("lagrev-in"), N: 400, Keys: 40}
		out, group := itest.Unique("lagrev-out"), itest.Unique("lagrev-group")
		tg.NewTopics(t, parts, in.Topic, out)
		tg.ProduceLagInput(t, in, parts, 0)
		all := []int32{0, 1, 2, 3}

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out})
		waitSeries(t, tg, group, in.Topic, lagAgreeWait, "the first instance to report every partition", a)
		if got := seriesPartitions(a.PipelineMetrics.ConsumerLag, in.Topic); !slices.Equal(got, all) {
			t.Fatalf("first instance alone reports %v, want %v", got, all)
		}

		b := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-b", Topics: []string{in.Topic}, Out: out})
		assigned := waitSeries(t, tg, group, in.Topic, 45*time.Second, "each instance's series to be its share of the partitions", a, b)
		pa, pb := assigned[0], assigned[1]
		if len(pa) == 0 || len(pb) == 0 || len(pa) >= parts {
			t.Errorf("after the second joined: first reports %v, second %v; want the first's series to shrink to its share", pa, pb)
		}
		seen := map[int32]int{}
		for _, p := range append(slices.Clone(pa), pb...) {
			seen[p]++
		}
		for _, p := range all {
			if seen[p] != 1 {
				t.Errorf("partition %d reported by %d instances (first %v, second %v), want 1", p, seen[p], pa, pb)
			}
		}
		tg.WaitCaughtUpWithin(t, lagCatchUp, group, in.Topic, a, b)
		b.Stop(t)
		a.Stop(t)
	})
}

// raiseMaxSessionTimeout sets kfake's group.max.session.timeout.ms to
// Kafka's default, 30 minutes (kfake's is 5).
func raiseMaxSessionTimeout(t testing.TB, tg *itest.Target) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := strconv.Itoa(int((30 * time.Minute).Milliseconds()))
	resps, err := tg.Admin(t).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "group.max.session.timeout.ms", Value: &v}})
	if err == nil {
		for _, r := range resps {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("raising kfake's group.max.session.timeout.ms: %v", err)
	}
}

// ---------------------------------------------------------------- input ----

// lagGate passes records through and holds, once, the first record by
// which every one of parts partitions has had at least min records, and p
// (once set) reports a committed offset for each.
type lagGate struct {
	parts, min int
	p          atomic.Pointer[pipeline.Pipeline]
	mu         sync.Mutex
	seen       map[int32]int
	held       bool
	entered    chan struct{} // closed when the held record is inside the transform
	release    chan struct{}
	relOnce    sync.Once
	cut        atomic.Bool // the held record's context ended before the gate opened
}

// committedAll reports whether p reports a committed offset for each of
// parts partitions.
func (g *lagGate) committedAll() bool {
	p := g.p.Load()
	if p == nil {
		return false
	}
	n := 0
	for _, ps := range p.Status().Partitions {
		if ps.Committed >= 0 {
			n++
		}
	}
	return n == g.parts
}

func newLagGate(parts, min int) *lagGate {
	return &lagGate{parts: parts, min: min, seen: map[int32]int{}, entered: make(chan struct{}), release: make(chan struct{})}
}

// open lets the held record go on; safe to call more than once.
func (g *lagGate) open() { g.relOnce.Do(func() { close(g.release) }) }

func (g *lagGate) chain(t testing.TB) *transform.Chain {
	t.Helper()
	return itest.FuncChain(t, "laggate", transform.Func(func(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		g.mu.Lock()
		g.seen[src.Partition]++
		hold := !g.held && len(g.seen) == g.parts
		for _, n := range g.seen {
			hold = hold && n >= g.min
		}
		hold = hold && g.committedAll()
		g.held = g.held || hold
		g.mu.Unlock()
		if hold {
			close(g.entered)
			select { // until the test opens the gate (deferred), or the instance stops
			case <-g.release:
			case <-ctx.Done():
				select {
				case <-g.release:
				default:
					g.cut.Store(true)
				}
			}
		}
		return append(out, r), nil
	}))
}

// ---------------------------------------------------------------- kafka ----

// waitKafka polls kadm until check finds nothing amiss, failing the test
// with check's last findings after d, or at once if running stops.
func waitKafka(t testing.TB, tg *itest.Target, d time.Duration, what, group, topic string, running *itest.Instance,
	check func(map[int32]itest.KafkaOffsets) []string) map[int32]itest.KafkaOffsets {
	t.Helper()
	var ins []*itest.Instance
	if running != nil {
		ins = append(ins, running)
	}
	var k map[int32]itest.KafkaOffsets
	waitNothingAmiss(t, d, what, ins, func() []string {
		var err error
		if k, err = tg.KafkaView(t, group, topic); err != nil {
			return []string{err.Error()}
		}
		return check(k)
	})
	return k
}

// waitNothingAmiss polls check every 100ms until it finds nothing amiss,
// failing the test with its last findings after d, or at once if one of
// running stops.
func waitNothingAmiss(t testing.TB, d time.Duration, what string, running []*itest.Instance, check func() []string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		diffs := check()
		if len(diffs) == 0 {
			return
		}
		last := strings.Join(diffs, "; ")
		for _, in := range running {
			select {
			case <-in.Done:
				in.Stopped = true
				t.Fatalf("an instance stopped while waiting for %s: %v (%s)", what, in.Err, last)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; still: %s", d, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// --------------------------------------------------------------- gauges ----

// partitionGauges returns the value of each series of g for topic, by
// partition, without creating any.
func partitionGauges(g *prometheus.GaugeVec, topic string) map[int32]float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	mfs, err := reg.Gather()
	if err != nil {
		panic(err) // a GaugeVec always gathers
	}
	out := map[int32]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			p, err := strconv.Atoi(l["partition"])
			if l["topic"] != topic || err != nil {
				continue
			}
			out[int32(p)] = m.GetGauge().GetValue()
		}
	}
	return out
}

// seriesPartitions returns the partitions of topic that g has series for.
func seriesPartitions(g *prometheus.GaugeVec, topic string) []int32 {
	var ps []int32
	for p := range partitionGauges(g, topic) {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

type namedGauge struct {
	name string
	g    *prometheus.GaugeVec
}

func partitionGaugeVecs(pm *pipeline.Metrics) []namedGauge {
	return []namedGauge{
		{"processor_consumer_lag_records", pm.ConsumerLag},
		{"processor_committed_offset", pm.CommittedOffset},
		{"processor_log_end_offset", pm.LogEndOffset},
		{"processor_last_stable_offset", pm.LastStableOffset},
		{"processor_partition_unstable_records", pm.UnstableRecords},
	}
}

// gaugeMismatches compares an instance's gauges for topic with Kafka's
// offsets k, for an instance assigned every partition of k: lag is last
// stable minus committed (from the log start, 0 in these tests, before
// the group's first commit); unstable is log end minus last stable; a
// partition without a committed offset has no committed series.
func gaugeMismatches(pm *pipeline.Metrics, topic string, k map[int32]itest.KafkaOffsets) []string {
	var diffs []string
	for _, ng := range partitionGaugeVecs(pm) {
		vals := partitionGauges(ng.g, topic)
		for p, o := range k {
			want, wantSeries := float64(0), true
			switch ng.g {
			case pm.ConsumerLag:
				want = float64(o.LastStable - max(o.Committed, 0))
			case pm.CommittedOffset:
				want, wantSeries = float64(o.Committed), o.Committed >= 0
			case pm.LogEndOffset:
				want = float64(o.LogEnd)
			case pm.LastStableOffset:
				want = float64(o.LastStable)
			case pm.UnstableRecords:
				want = float64(o.LogEnd - o.LastStable)
			}
			got, ok := vals[p]
			switch {
			case !wantSeries && ok:
				diffs = append(diffs, fmt.Sprintf("%s{partition=%d} = %v, want no series (nothing committed)", ng.name, p, got))
			case wantSeries && !ok:
				diffs = append(diffs, fmt.Sprintf("%s{partition=%d} missing, want %v", ng.name, p, want))
			case wantSeries && got != want:
				diffs = append(diffs, fmt.Sprintf("%s{partition=%d} = %v, want %v", ng.name, p, got, want))
			}
		}
		for p := range vals {
			if _, ok := k[p]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s has a series for partition %d, which the topic does not have", ng.name, p))
			}
		}
	}
	slices.Sort(diffs)
	return diffs
}

// waitGaugesAgree waits until inst's gauges agree with Kafka's offsets
// read just before and just after them (unchanged in between), and
// returns those offsets.
func waitGaugesAgree(t testing.TB, tg *itest.Target, inst *itest.Instance, group, topic, what string) map[int32]itest.KafkaOffsets {
	t.Helper()
	var agreed map[int32]itest.KafkaOffsets
	waitKafka(t, tg, lagAgreeWait, what, group, topic, inst, func(k map[int32]itest.KafkaOffsets) []string {
		if diffs := gaugeMismatches(inst.PipelineMetrics, topic, k); len(diffs) > 0 {
			return diffs
		}
		again, err := tg.KafkaView(t, group, topic)
		if err != nil {
			return []string{err.Error()}
		}
		if !maps.Equal(k, again) {
			return []string{fmt.Sprintf("Kafka's offsets moved while reading the gauges: %v, then %v", k, again)}
		}
		agreed = k
		return nil
	})
	return agreed
}

// checkStatus asserts that Status() reports the offsets k too.
func checkStatus(t testing.TB, inst *itest.Instance, topic string, k map[int32]itest.KafkaOffsets) {
	t.Helper()
	s := inst.Pipeline.Status()
	var total int64
	for _, ps := range s.Partitions {
		o, ok := k[ps.Partition]
		if ps.Topic != topic || !ok {
			t.Errorf("Status() reports %s/%d, not a partition of %s", ps.Topic, ps.Partition, topic)
			continue
		}
		wantLag := o.LastStable - max(o.Committed, 0)
		total += wantLag
		if ps.Committed != o.Committed || ps.LogEnd != o.LogEnd || ps.LastStable != o.LastStable || ps.Lag != wantLag ||
			ps.Unstable != o.LogEnd-o.LastStable {
			t.Errorf("Status() p%d: committed %d log end %d last stable %d lag %d unstable %d; Kafka: committed %d log end %d last stable %d",
				ps.Partition, ps.Committed, ps.LogEnd, ps.LastStable, ps.Lag, ps.Unstable, o.Committed, o.LogEnd, o.LastStable)
		}
	}
	if len(s.Partitions) != len(k) || s.Lag != total {
		t.Errorf("Status(): %d partitions, lag %d; want %d partitions, lag %d", len(s.Partitions), s.Lag, len(k), total)
	}
}

// waitSeries waits until the broker describes group as stable with one
// member per instance, and every partition gauge of each instance has
// series for exactly the partitions of topic the broker assigned it. It
// returns each instance's partitions.
func waitSeries(t testing.TB, tg *itest.Target, group, topic string, d time.Duration, what string, ins ...*itest.Instance) [][]int32 {
	t.Helper()
	out := make([][]int32, len(ins))
	waitNothingAmiss(t, d, what, ins, func() []string {
		assigned, err := tg.Assignment(t, group, topic)
		var diffs []string
		if err != nil {
			diffs = append(diffs, err.Error())
		}
		for i, in := range ins {
			member := in.Pipeline.Status().MemberID
			want, ok := assigned[member]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("instance %d (member %q) has no assignment in the group's description %v", i, member, assigned))
				continue
			}
			out[i] = want
			for _, ng := range partitionGaugeVecs(in.PipelineMetrics) {
				if got := seriesPartitions(ng.g, topic); !slices.Equal(got, want) {
					diffs = append(diffs, fmt.Sprintf("instance %d: %s has series for %v, assigned %v", i, ng.name, got, want))
				}
			}
		}
		if err == nil && len(assigned) != len(ins) {
			diffs = append(diffs, fmt.Sprintf("the group has %d members with assignments, want %d", len(assigned), len(ins)))
		}
		return diffs
	})
	return out
}

// ---------------------------------------------------- kafka-consumer-groups --

// toolRow is one partition's line of kafka-consumer-groups --describe; -1
// stands for its "-" (nothing committed).
type toolRow struct{ current, logEnd, lag int64 }

// consumerGroupsTool runs Kafka's kafka-consumer-groups --describe for
// group through kafka/kafka.sh consumer-groups (java and the jars the
// script fetches) and returns topic's rows by partition. It fails the test
// when the tool cannot run: a real broker is configured, so this check is
// due.
func consumerGroupsTool(t testing.TB, tg *itest.Target, group, topic string) map[int32]toolRow {
	t.Helper()
	const script = "../kafka/kafka.sh"
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("PROCESSOR_TEST_BROKERS is set, so the lag is compared with Kafka's kafka-consumer-groups, run by %s: %v", script, err)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("PROCESSOR_TEST_BROKERS is set, so the lag is compared with Kafka's kafka-consumer-groups, which needs java (17+) on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lagToolWait)
	defer cancel()
	args := []string{script, "consumer-groups", "--bootstrap-server", strings.Join(tg.Brokers, ","), "--describe", "--group", group}
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	what := "bash " + strings.Join(args, " ")
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s did not finish within %s, killed: %v\nstdout:\n%s\nstderr:\n%s", what, lagToolWait, err, &stdout, &stderr)
	case err != nil:
		t.Fatalf("%s failed (it needs java 17+, and mvn the first time to fetch kafka-tools; see kafka/README.md): %v\nstdout:\n%s\nstderr:\n%s",
			what, err, &stdout, &stderr)
	}
	rows, err := parseConsumerGroups(stdout.String(), topic)
	if err != nil {
		// The tool prints its own errors ("Error: ...") and exits 0.
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, &stdout, &stderr)
	}
	t.Logf("%s:\n%s", what, strings.TrimSpace(stdout.String()))
	return rows
}

// parseConsumerGroups reads the table of kafka-consumer-groups --describe:
// a header line (GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
// CONSUMER-ID HOST CLIENT-ID), then one line per partition, columns
// separated by spaces, "-" for a value it does not have.
func parseConsumerGroups(out, topic string) (map[int32]toolRow, error) {
	if i := strings.Index(out, "Error:"); i >= 0 {
		line, _, _ := strings.Cut(out[i:], "\n")
		return nil, fmt.Errorf("the tool failed: %s", line)
	}
	var header []string
	col := map[string]int{}
	rows := map[int32]toolRow{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if header == nil {
			if f[0] == "GROUP" && slices.Contains(f, "CURRENT-OFFSET") {
				header = f
				for i, name := range f {
					col[name] = i
				}
				for _, name := range []string{"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"} {
					if _, ok := col[name]; !ok {
						return nil, fmt.Errorf("no %s column in the header %q", name, strings.TrimSpace(line))
					}
				}
			}
			continue
		}
		if len(f) != len(header) {
			return nil, fmt.Errorf("line %q has %d columns, the header %d", strings.TrimSpace(line), len(f), len(header))
		}
		if f[col["TOPIC"]] != topic {
			continue
		}
		p, err := strconv.Atoi(f[col["PARTITION"]])
		if err != nil {
			return nil, fmt.Errorf("line %q: partition: %w", strings.TrimSpace(line), err)
		}
		var r toolRow
		for _, c := range []struct {
			name string
			to   *int64
		}{{"CURRENT-OFFSET", &r.current}, {"LOG-END-OFFSET", &r.logEnd}, {"LAG", &r.lag}} {
			v := f[col[c.name]]
			if v == "-" {
				*c.to = -1
				continue
			}
			if *c.to, err = strconv.ParseInt(v, 10, 64); err != nil {
				return nil, fmt.Errorf("line %q: %s: %w", strings.TrimSpace(line), c.name, err)
			}
		}
		rows[int32(p)] = r
	}
	if header == nil {
		return nil, errors.New("no table (no GROUP ... CURRENT-OFFSET header line)")
	}
	return rows, nil
}

// checkConsumerGroupsTool runs kafka-consumer-groups while the offsets of
// group and topic stand still (the processor held, or caught up) and
// asserts that its table agrees with kadm and with inst's gauges. It
// returns the tool's rows.
//
// What the tool reports (Kafka 4.4.0, checked against the broker here):
// CURRENT-OFFSET is the group's committed offset; LOG-END-OFFSET is the
// high watermark, not the last stable offset, also for a group that reads
// read_committed (it lists offsets read_uncommitted and cannot know how the
// group reads); LAG is LOG-END-OFFSET minus CURRENT-OFFSET. So the tool's
// LAG is our lag plus our unstable records (records of upstream
// transactions not decided yet). Caught up, it is 0 on transactional input
// too: the processor commits past the last transaction marker.
func checkConsumerGroupsTool(t testing.TB, tg *itest.Target, inst *itest.Instance, group, topic string) map[int32]toolRow {
	t.Helper()
	for attempt := 1; ; attempt++ {
		before, err := tg.KafkaView(t, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		rows := consumerGroupsTool(t, tg, group, topic)
		after, err := tg.KafkaView(t, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(before, after) {
			if attempt < 3 {
				continue
			}
			t.Fatalf("Kafka's offsets moved during kafka-consumer-groups, %d times: %v, then %v", attempt, before, after)
		}
		lag := partitionGauges(inst.PipelineMetrics.ConsumerLag, topic)
		committed := partitionGauges(inst.PipelineMetrics.CommittedOffset, topic)
		logEnd := partitionGauges(inst.PipelineMetrics.LogEndOffset, topic)
		unstable := partitionGauges(inst.PipelineMetrics.UnstableRecords, topic)
		if len(rows) != len(before) {
			t.Errorf("kafka-consumer-groups lists %d partitions of %s, Kafka has %d", len(rows), topic, len(before))
		}
		for p, k := range before {
			r, ok := rows[p]
			if !ok {
				t.Errorf("kafka-consumer-groups: no line for p%d", p)
				continue
			}
			wantLag := int64(-1)
			if k.Committed >= 0 {
				wantLag = k.LogEnd - k.Committed
			}
			if r.current != k.Committed || r.logEnd != k.LogEnd || r.lag != wantLag {
				t.Errorf("kafka-consumer-groups p%d: CURRENT-OFFSET %d LOG-END-OFFSET %d LAG %d; kadm: committed %d, high watermark %d, last stable %d (want LAG %d, high watermark minus committed)",
					p, r.current, r.logEnd, r.lag, k.Committed, k.LogEnd, k.LastStable, wantLag)
			}
			if c, ok := committed[p]; (ok || r.current >= 0) && (!ok || int64(c) != r.current) {
				t.Errorf("p%d: processor_committed_offset %v (series: %v), kafka-consumer-groups CURRENT-OFFSET %d", p, c, ok, r.current)
			}
			if int64(logEnd[p]) != r.logEnd {
				t.Errorf("p%d: processor_log_end_offset %v, kafka-consumer-groups LOG-END-OFFSET %d", p, logEnd[p], r.logEnd)
			}
			if r.lag >= 0 && int64(lag[p]+unstable[p]) != r.lag {
				t.Errorf("p%d: processor_consumer_lag_records %v + processor_partition_unstable_records %v, kafka-consumer-groups LAG %d",
					p, lag[p], unstable[p], r.lag)
			}
		}
		return rows
	}
}
