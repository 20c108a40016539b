package pipeline

// Fast tests of the loop itself: the real Pipeline (New and Run) on a real
// txn.Session against an in-process kfake cluster over TCP, each in a few
// seconds (the watchdog's, which needs no broker, on a session in memory:
// newMemEnv). Every test reads its output back with read_committed and checks
// it against the input: each input exactly once, per-key order, the right
// topic, and lineage headers naming the input's exact position.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// loopEnv is one kfake cluster with an input, an output and a dead-letter
// topic, and the input records as the cluster stored them.
type loopEnv struct {
	t *testing.T
	c *kafkatest.Cluster
	// cluster, brokers and adm are c's kfake cluster, brokers and admin
	// client.
	cluster *kfake.Cluster
	brokers []string
	adm     *kadm.Client
	in      string
	out     string
	dlq     string
	inputs  []*kgo.Record          // with Partition and Offset set
	byValue map[string]*kgo.Record // input by value
	// noLineage: the pipeline runs without Options.Lineage, so checkTopic
	// wants no lineage headers at all.
	noLineage bool
	// mem, when set, is the cluster in memory the env runs on instead
	// (newMemEnv); cluster, brokers and adm are then unset.
	mem *memkafka.Cluster
}

const loopPartitions = 3

func newLoopEnv(t *testing.T) *loopEnv {
	t.Helper()
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.ClusterID("pipeline-loop"))
	e := &loopEnv{t: t, c: c, cluster: c.Fake, brokers: c.Brokers, adm: c.Admin(t), in: "in", out: "out", dlq: "dlq", byValue: map[string]*kgo.Record{}}
	c.CreateTopics(t, loopPartitions, nil, e.in, e.out, e.dlq)
	return e
}

// loopValue is input record i of a data set with keys keys: value
// "k<key>:<seq>", seq counting per key, so that order per key can be
// checked.
func loopValue(i, keys int) (key, value string) {
	k := "k" + strconv.Itoa(i%keys)
	return k, k + ":" + strconv.Itoa(i/keys)
}

// loopSeq returns the per-key sequence number of a value.
func loopSeq(v string) int {
	_, s, _ := strings.Cut(v, ":")
	n, _ := strconv.Atoi(s)
	return n
}

// produce writes n keyed input records (partitioned by key) and keeps
// them with their offsets.
func (e *loopEnv) produce(n, keys int) {
	e.t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k, v := loopValue(len(e.inputs)+i, keys)
		recs[i] = &kgo.Record{Topic: e.in, Key: []byte(k), Value: []byte(v)}
	}
	e.produceInputs(recs, kgo.ProducerLinger(time.Millisecond))
}

// produceInputs writes recs with a client of opts (besides the seed
// brokers) and keeps them, with their offsets, as the input.
func (e *loopEnv) produceInputs(recs []*kgo.Record, opts ...kgo.Opt) {
	e.t.Helper()
	if e.mem != nil {
		e.produceMem(recs)
		return
	}
	e.c.ProduceSync(e.t, recs, opts...)
	for _, r := range recs {
		e.inputs = append(e.inputs, r)
		e.byValue[string(r.Value)] = r
	}
}

// chainOf builds a chain of the one transform fn, registered as name.
func chainOf(t testing.TB, name string, fn transform.Func) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	var tr transform.Transform = fn
	if loopOrdering != "" {
		tr = orderedFunc(fn)
	}
	reg.Register(name, transform.Plain("", func() (transform.Transform, error) { return tr, nil }))
	c, err := reg.Build([]transform.Entry{{Name: name}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loopChain builds a chain of the one transform fn, named "loop".
func loopChain(t *testing.T, fn transform.Func) *transform.Chain {
	t.Helper()
	c := chainOf(t, "loop", fn)
	loopFns[c] = fn
	return c
}

// gate holds the first record that reaches it inside the transform until
// release is closed (or for at most max), and closes inside when that
// record arrives.
type gate struct {
	once            sync.Once
	max             time.Duration
	inside, release chan struct{}
}

func newGate(max time.Duration) *gate {
	return &gate{max: max, inside: make(chan struct{}), release: make(chan struct{})}
}

// hold is called by the transform; only its first call waits.
func (g *gate) hold() {
	g.once.Do(func() {
		close(g.inside)
		select {
		case <-g.release:
		case <-time.After(g.max):
		}
	})
}

// chain is a pass-through chain (loopChain) whose first record waits at g.
func (g *gate) chain(t *testing.T) *transform.Chain {
	t.Helper()
	return loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		g.hold()
		return append(out, r), nil
	})
}

// wait fails the test unless a record reaches g within 20s, before run
// returns; what names the record.
func (g *gate) wait(t *testing.T, run *loopRun, what string) {
	t.Helper()
	select {
	case <-g.inside:
	case <-run.done:
		t.Fatalf("Run returned %v before %s reached the transform", run.err, what)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not reach the transform within 20s", what)
	}
}

// loopWorkers is how many workers start gives a pipeline whose chain
// loopChain built (one more chain of the same function per worker);
// TestLoopWithWorkers runs the loop tests again with 2.
var loopWorkers = 1

// loopOrdering, when set, makes the chains that chainOf builds ordered
// (transform.Ordered) and start's pipelines share their records by it;
// TestLoopWithWorkersOrdered runs the loop tests again so.
var loopOrdering Ordering

// orderedFunc is a transform.Func that must see records in order.
type orderedFunc transform.Func

func (f orderedFunc) Process(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return f(ctx, src, r, out)
}

func (orderedFunc) Ordered() bool { return true }

// loopFns are the functions of the chains loopChain built.
var loopFns = map[*transform.Chain]transform.Func{}

// passThrough is the identity transform.
func passThrough(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return append(out, r), nil
}

// loopLogger logs the pipeline and session (info and up; debug with
// PROCESSOR_TEST_DEBUG set) into the test's log.
func loopLogger(t *testing.T) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("PROCESSOR_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(loopWriter{t}, &slog.HandlerOptions{Level: level}))
}

type loopWriter struct{ t *testing.T }

func (w loopWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// loopRun is one Run of a pipeline on its own session and metrics.
type loopRun struct {
	p      *Pipeline
	s      Session // what p runs on
	tm     *txn.Metrics
	pm     *Metrics
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// sessionOpts are the session options of a run in group group.
func (e *loopEnv) sessionOpts(group, txnID string, tm *txn.Metrics) txn.Options {
	return txn.Options{
		Brokers:            e.brokers,
		Group:              group,
		Topics:             []string{e.in},
		TransactionalID:    txnID,
		SessionTimeout:     10 * time.Second,
		TransactionTimeout: 8 * time.Second,
		Metrics:            tm,
	}
}

// start runs a pipeline over the input until stop. o's metrics and, when
// unset, output topic, input topics, commit interval and size are filled
// in.
func (e *loopEnv) start(group, txnID string, chain *transform.Chain, o Options) *loopRun {
	e.t.Helper()
	return e.startWith(group, txnID, chain, o, nil)
}

// startWith is start with the session's options edited by tweak (when not
// nil), e.g. to add client options.
func (e *loopEnv) startWith(group, txnID string, chain *transform.Chain, o Options, tweak func(*txn.Options)) *loopRun {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	tm := txn.NewMetrics(reg)
	if o.Logger == nil {
		o.Logger = loopLogger(e.t)
	}
	s, obs := e.session(group, txnID, tm, o.Logger, tweak)
	if o.OutputTopic == "" {
		o.OutputTopic = e.out
	}
	if o.InputTopics == nil {
		o.InputTopics = []string{e.in}
	}
	o.Metrics = NewMetrics(reg)
	if o.CommitInterval == 0 {
		o.CommitInterval = 100 * time.Millisecond
	}
	if o.MaxRecordsPerTxn == 0 {
		o.MaxRecordsPerTxn = 500
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = 8 * time.Second
	}
	if o.SettingName == nil {
		o.SettingName = envSettingName
	}
	if o.Ordering == "" {
		o.Ordering = loopOrdering
	}
	if fn, ok := loopFns[chain]; ok && o.Chains == nil {
		for range loopWorkers - 1 {
			o.Chains = append(o.Chains, loopChain(e.t, fn))
		}
	}
	p, err := New(chain, o)
	if err != nil {
		s.Close()
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &loopRun{p: p, s: s, tm: tm, pm: o.Metrics, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = p.Run(ctx, s, obs)
	}()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			e.t.Error("a pipeline did not stop within 20s of the test's end")
		}
	})
	return r
}

// session returns a session of group on the env's input: a real one with
// the options tweak edits (when not nil), or one in memory (newMemEnv),
// which takes no options.
func (e *loopEnv) session(group, txnID string, tm *txn.Metrics, log *slog.Logger, tweak func(*txn.Options)) (Session, Observer) {
	e.t.Helper()
	if e.mem != nil {
		if tweak != nil {
			e.t.Fatal("session options apply to a real session only")
		}
		s := newMemSession(e.mem, group, txnID, e.in, tm)
		return s, s
	}
	so := e.sessionOpts(group, txnID, tm)
	so.Logger = log
	if tweak != nil {
		tweak(&so)
	}
	s, err := txn.New(so)
	if err != nil {
		e.t.Fatal(err)
	}
	return s, s
}

// stop ends the run's context and waits for Run to return, at most
// within: a clean stop returns nil promptly.
func (r *loopRun) stop(t *testing.T, within time.Duration) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(within):
		t.Fatalf("Run did not return within %s of its context's end", within)
	}
	if r.err != nil {
		t.Errorf("Run returned %v after a stop, want nil", r.err)
	}
}

// eventually polls cond every 10ms until it holds or timeout passes;
// it fails the test at once if run stopped.
func eventually(t *testing.T, timeout time.Duration, what string, run *loopRun, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if run != nil {
			select {
			case <-run.done:
				t.Fatalf("Run returned (%v) while waiting for %s; %+v", run.err, what, run.p.Stats())
			default:
			}
		}
		if time.Now().After(deadline) {
			if run != nil {
				t.Fatalf("timed out after %s waiting for %s; %+v", timeout, what, run.p.Stats())
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// committedOffsets returns group's committed offset per input partition.
func (e *loopEnv) committedOffsets(group string) map[int32]int64 {
	e.t.Helper()
	if e.mem != nil {
		return e.mem.Committed(group, e.in)
	}
	return e.c.Committed(e.t, group, e.in)
}

func sumOffsets(m map[int32]int64) int64 {
	var n int64
	for _, o := range m {
		n += o
	}
	return n
}

// caughtUp reports whether group committed every input record.
func (e *loopEnv) caughtUp(group string) bool {
	return sumOffsets(e.committedOffsets(group)) == int64(len(e.inputs))
}

// openTxnRecords returns, per topic, how many records sit above the last
// stable offset: records of transactions that were neither committed nor
// aborted.
func (e *loopEnv) openTxnRecords(topics ...string) map[string]int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := e.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		e.t.Fatal(err)
	}
	stable, err := e.adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		e.t.Fatal(err)
	}
	open := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := stable.Lookup(o.Topic, o.Partition); ok && s.Offset < o.Offset {
			open[o.Topic] += o.Offset - s.Offset
		}
	})
	return open
}

// read reads topic from its start to its end offsets, read_committed or
// read_uncommitted, and returns its data records.
func (e *loopEnv) read(topic string, committed bool) []*kgo.Record {
	e.t.Helper()
	if e.mem != nil {
		return e.mem.Read(topic, committed)
	}
	return e.c.ReadAll(e.t, topic, committed)
}

// checkTopic is the exactly-once reader check of one topic's read_committed
// records: each input that want selects appears exactly once and no other
// input does, in per-key order, each with lineage headers naming the
// input's exact topic, partition and offset (or none, with noLineage).
func (e *loopEnv) checkTopic(topic string, recs []*kgo.Record, want func(in *kgo.Record) bool) {
	e.t.Helper()
	t := e.t
	seen := map[string]int{}
	last := map[string]int{}
	var dups, unknown, unwanted, order, lineage int
	var examples []string
	note := func(format string, args ...any) {
		if len(examples) < 5 {
			examples = append(examples, fmt.Sprintf(format, args...))
		}
	}
	for _, r := range recs {
		v := string(r.Value)
		in, ok := e.byValue[v]
		if !ok {
			unknown++
			note("unknown value %q", v)
			continue
		}
		if seen[v]++; seen[v] > 1 {
			dups++
			note("%q %d times", v, seen[v])
			continue
		}
		if !want(in) {
			unwanted++
			note("%q does not belong in %s", v, topic)
		}
		if string(r.Key) != string(in.Key) {
			t.Errorf("%s: %q has key %q, want %q", topic, v, r.Key, in.Key)
		}
		k, seq := string(in.Key), loopSeq(v)
		if l, ok := last[k]; ok && seq <= l {
			order++
			note("%q after seq %d of its key", v, l)
		}
		last[k] = seq
		wantLineage := map[string]string{
			record.HeaderSource:          in.Topic + "/" + strconv.Itoa(int(in.Partition)) + "/" + strconv.FormatInt(in.Offset, 10),
			record.HeaderSourceTopic:     "",
			record.HeaderSourcePartition: "",
			record.HeaderSourceOffset:    "",
		}
		for key, wv := range wantLineage {
			if e.noLineage {
				if got, n := header(r, key); n != 0 {
					lineage++
					note("%q: header %s = %q without lineage", v, key, got)
				}
				continue
			}
			if got, n := header(r, key); (wv == "" && n != 0) || (wv != "" && (n != 1 || got != wv)) {
				lineage++
				note("%q: header %s = %q (%d times), want %q once", v, key, got, n, wv)
			}
		}
	}
	lost := 0
	for _, in := range e.inputs {
		if want(in) && seen[string(in.Value)] == 0 {
			lost++
			note("%q (partition %d offset %d) missing", in.Value, in.Partition, in.Offset)
		}
	}
	if dups+unknown+unwanted+order+lineage+lost > 0 {
		t.Errorf("%s is not exactly once: %d records, %d lost, %d duplicated, %d that belong elsewhere, %d unknown, %d per-key order breaks, %d wrong lineage headers; e.g. %s",
			topic, len(recs), lost, dups, unwanted, unknown, order, lineage, strings.Join(examples, "; "))
	}
}

// abortedTotal sums processor_transactions_aborted_total over reasons.
func abortedTotal(tm *txn.Metrics) float64 {
	var n float64
	for _, r := range []txn.Reason{txn.ReasonRebalance, txn.ReasonOffsetCommit, txn.ReasonProduce, txn.ReasonTransform,
		txn.ReasonFenced, txn.ReasonEndError, txn.ReasonInjected, txn.ReasonWatchdog, txn.ReasonTimeout, txn.ReasonUnavailable} {
		n += testutil.ToFloat64(tm.Aborted.WithLabelValues(string(r)))
	}
	return n
}

// checkCounters asserts that the pipeline's counters agree with the
// transaction metrics and with what was committed: commits and aborts as
// the session counted them, and consumed records as the group committed.
func checkCounters(t *testing.T, r *loopRun, committedInput int64) {
	t.Helper()
	st := r.p.Stats()
	if c := testutil.ToFloat64(r.tm.Committed); st.Commits != uint64(c) {
		t.Errorf("Stats().Commits = %d, processor_transactions_committed_total = %v", st.Commits, c)
	}
	if a := abortedTotal(r.tm); st.Aborts != uint64(a) {
		t.Errorf("Stats().Aborts = %d, processor_transactions_aborted_total sums to %v", st.Aborts, a)
	}
	if st.Consumed != uint64(committedInput) {
		t.Errorf("Stats().Consumed = %d, the group committed %d input records", st.Consumed, committedInput)
	}
	if c := testutil.ToFloat64(r.pm.Consumed); c != float64(st.Consumed) {
		t.Errorf("processor_records_consumed_total = %v, Stats().Consumed = %d", c, st.Consumed)
	}
}

// The loop's main path: 4,000 keyed records over 3 partitions in
// transactions of at most 500, some filtered and some failing for good
// (dead-lettered). The output holds every passed input exactly once, in
// per-key order, with lineage headers naming its input's offset; the
// dead-letter topic holds exactly the failed inputs, with their error;
// nothing else goes anywhere; and every counter agrees with what the group
// committed.
func TestLoopExactlyOnce(t *testing.T) {
	e := newLoopEnv(t)
	const n, keys = 4000, 40
	e.produce(n, keys)
	bad := func(r *kgo.Record) bool { return loopSeq(string(r.Value))%13 == 5 }
	filtered := func(r *kgo.Record) bool { return loopSeq(string(r.Value))%17 == 3 && !bad(r) }
	good := func(r *kgo.Record) bool { return !bad(r) && !filtered(r) }
	var calls atomic.Int64
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		calls.Add(1)
		switch {
		case bad(r):
			return out, errors.New("bad record")
		case filtered(r):
			return out, nil
		}
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{Lineage: true, OnError: DeadLetter, DLQTopic: e.dlq})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	e.checkTopic(e.out, e.read(e.out, true), good)
	dead := e.read(e.dlq, true)
	e.checkTopic(e.dlq, dead, bad)
	for _, d := range dead {
		if msg, _ := header(d, record.HeaderError); !strings.Contains(msg, "bad record") {
			t.Errorf("dead letter %q has error header %q", d.Value, msg)
			break
		}
	}
	var nGood, nBad, nFiltered int
	for _, in := range e.inputs {
		switch {
		case bad(in):
			nBad++
		case filtered(in):
			nFiltered++
		default:
			nGood++
		}
	}
	st := run.p.Stats()
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	if st.Consumed != n || st.Produced != uint64(nGood) || st.Aborts != 0 || calls.Load() != n {
		t.Errorf("Stats() = %+v after %d transform calls; want %d consumed, %d produced, no aborts, %d calls", st, calls.Load(), n, nGood, n)
	}
	for name, c := range map[string]struct {
		got  float64
		want int
	}{
		"records_produced_total{out}": {testutil.ToFloat64(run.pm.Produced.WithLabelValues(e.out)), nGood},
		"records_dlq_total":           {testutil.ToFloat64(run.pm.DLQ), nBad},
		"records_filtered_total":      {testutil.ToFloat64(run.pm.Filtered), nFiltered},
		"records_consumed_total":      {testutil.ToFloat64(run.pm.Consumed), n},
	} {
		if c.got != float64(c.want) {
			t.Errorf("processor_%s = %v, want %d", name, c.got, c.want)
		}
	}
	if open := e.openTxnRecords(e.out, e.dlq); len(open) > 0 {
		t.Errorf("records of open transactions after the stop: %v", open)
	}
	t.Logf("%d inputs: %d out, %d dead letters, %d filtered, %d commits", n, nGood, nBad, nFiltered, st.Commits)
}

// Transactions aborted on purpose (Options.InjectAbort) leave their
// records in the log but invisible to read_committed, their input is
// processed again, and none of them is counted as a commit or as consumed.
func TestLoopInjectedAbortInvisibleAndReprocessed(t *testing.T) {
	e := newLoopEnv(t)
	const n, keys = 3000, 30
	e.produce(n, keys)
	var calls atomic.Int64
	seen := make([]atomic.Int32, n)
	idx := map[string]int{}
	for i, in := range e.inputs {
		idx[string(in.Value)] = i
	}
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		calls.Add(1)
		seen[idx[string(r.Value)]].Add(1)
		return append(out, r), nil
	})
	var asked sync.Map
	inject := func(seq uint64) bool {
		asked.Store(seq, true)
		return seq == 1 || seq == 3 || seq == 4
	}
	run := e.start("g", "g-a", chain, Options{Lineage: true, MaxRecordsPerTxn: 400, InjectAbort: inject})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	if got := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonInjected))); got != 3 {
		t.Errorf("aborted{reason=injected} = %v, want 3", got)
	}
	st := run.p.Stats()
	if st.Aborts != 3 || st.Consumed != n || st.Produced != n {
		t.Errorf("Stats() = %+v, want 3 aborts, %d consumed and produced", st, n)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	if c := testutil.ToFloat64(run.pm.Produced.WithLabelValues(e.out)); c != n {
		t.Errorf("processor_records_produced_total = %v, want %d", c, n)
	}
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
	dirty := e.read(e.out, false)
	if len(dirty) <= n {
		t.Errorf("read_uncommitted sees %d records, want more than %d: the aborted transactions' records should reach the log", len(dirty), n)
	}
	again := 0
	for i := range seen {
		if seen[i].Load() > 1 {
			again++
		}
	}
	if again == 0 {
		t.Errorf("no input was processed more than once (%d calls for %d inputs); the aborted transactions' input must be processed again", calls.Load(), n)
	}
	// Every transform call beyond the first per input redid a record of
	// an aborted transaction, and every such record is in the log.
	if extra := int(calls.Load()) - n; extra != len(dirty)-n {
		t.Errorf("%d transform calls beyond the %d inputs, but %d records of aborted transactions in the log", extra, n, len(dirty)-n)
	}
	t.Logf("%d commits, %d aborts; %d inputs processed again; %d records in the log", st.Commits, st.Aborts, again, len(dirty))
}

// A transaction whose processing outruns its time budget is aborted by the
// watchdog (reason "watchdog"), no record is processed past the budget, and
// smaller transactions then finish the input exactly once without failing
// any record.
func TestLoopWatchdogAborts(t *testing.T) {
	e := newMemEnv(t)
	const n, keys = 600, 12
	e.produce(n, keys)
	const budget = 250 * time.Millisecond
	var late atomic.Int64
	var lateBy atomic.Int64
	chain := loopChain(t, func(ctx context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		// A transform that does not watch its context: only the loop
		// can stop the transaction at its budget.
		if d, ok := ctx.Deadline(); ok {
			if over := time.Since(d); over > 150*time.Millisecond { // slack for a loaded machine
				late.Add(1)
				lateBy.Store(int64(over))
			}
		}
		time.Sleep(2 * time.Millisecond)
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{Lineage: true, CommitInterval: time.Second, MaxRecordsPerTxn: 10_000,
		TxnBudget: budget, OnError: DeadLetter, DLQTopic: e.dlq})
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	if got := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonWatchdog))); got < 1 {
		t.Errorf("aborted{reason=watchdog} = %v, want at least 1: 600 records at 2ms each cannot fit a %s budget", got, budget)
	}
	if l := late.Load(); l > 0 {
		t.Errorf("%d records were processed after their transaction's budget ran out (the last %s late)", l, time.Duration(lateBy.Load()))
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	if d := testutil.ToFloat64(run.pm.DLQ); d != 0 {
		t.Errorf("%v records dead-lettered; the watchdog must not fail records", d)
	}
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
	if dead := e.read(e.dlq, false); len(dead) > 0 {
		t.Errorf("%d dead letters written", len(dead))
	}
	st := run.p.Stats()
	t.Logf("%d commits, %d aborts (watchdog %v)", st.Commits, st.Aborts, testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonWatchdog))))
}

// A stop while a transaction is open, with a record inside the transform,
// commits that transaction at once: Run returns nil promptly, nothing is
// aborted, the group's offsets cover exactly the records processed, no
// transaction is left open in the output (the last stable offset is at the
// end), and a restart finishes the input exactly once.
func TestLoopStopCommitsOpenTransaction(t *testing.T) {
	e := newLoopEnv(t)
	const n, keys = 2000, 20
	e.produce(n/2, keys)
	var calls atomic.Int64
	block := e.inputs[n/4]
	g := newGate(10 * time.Second)
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		calls.Add(1)
		if string(r.Value) == string(block.Value) {
			g.hold()
		}
		return append(out, r), nil
	})
	// One long transaction: only the stop can end it.
	first := e.start("g", "g-a", chain, Options{Lineage: true, CommitInterval: 30 * time.Second, MaxRecordsPerTxn: 100_000})
	g.wait(t, first, "the blocking record")
	if st := first.p.Stats(); st.Commits != 0 {
		t.Fatalf("Stats() = %+v before the stop; want the one transaction still open", st)
	}
	e.produce(n/2, keys) // the backlog the restart has to finish
	first.cancel()
	time.Sleep(50 * time.Millisecond) // the stop lands while the record is inside the transform
	close(g.release)
	began := time.Now()
	first.stop(t, 10*time.Second)
	took := time.Since(began)

	st := first.p.Stats()
	done := calls.Load()
	committed := e.committedOffsets("g")
	if open := e.openTxnRecords(e.out); len(open) > 0 {
		t.Fatalf("Run returned with a transaction still open: %v records above the output's last stable offset", open)
	}
	if st.Commits != 1 || st.Aborts != 0 || st.Consumed != uint64(done) {
		t.Errorf("after the stop Stats() = %+v for %d records processed; want 1 commit, 0 aborts, all of them consumed", st, done)
	}
	checkCounters(t, first, sumOffsets(committed))
	if a := abortedTotal(first.tm); a != 0 {
		t.Errorf("processor_transactions_aborted_total = %v after a stop, want 0", a)
	}
	// What the stop committed is exactly the inputs below the group's
	// offsets.
	below := func(in *kgo.Record) bool { return in.Offset < committed[in.Partition] }
	e.checkTopic(e.out, e.read(e.out, true), below)

	second := e.start("g", "g-b", loopChain(t, passThrough), Options{Lineage: true})
	eventually(t, 20*time.Second, "a restart to commit the rest", second, func() bool { return e.caughtUp("g") })
	second.stop(t, 10*time.Second)
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
	t.Logf("the stop committed %d of %d records in %s", st.Consumed, n, took.Round(time.Millisecond))
}
