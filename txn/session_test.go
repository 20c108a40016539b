package txn

// These tests drive Session against a kfake cluster over TCP, the way the
// processor drives it against Kafka: no part of the client is mocked.
// Broker-side failures are injected with kfake's Fault and ControlKey.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/record"
)

// logBuf collects a session's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count returns how many log lines contain every one of parts.
func (l *logBuf) count(parts ...string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// retryIn returns the retry_in of the one log line that contains every
// one of parts.
func (l *logBuf) retryIn(t *testing.T, parts ...string) time.Duration {
	t.Helper()
	var found []string
	for line := range strings.Lines(l.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			found = append(found, line)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d log lines with %q, want 1", len(found), parts)
	}
	_, v, ok := strings.Cut(found[0], " retry_in=")
	if !ok {
		t.Fatalf("no retry_in in %q", found[0])
	}
	v, _, _ = strings.Cut(v, " ")
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("retry_in in %q: %v", found[0], err)
	}
	return d
}

// fixture is a Session with its own metrics registry and log.
type fixture struct {
	*Session
	reg    *prometheus.Registry
	m      *Metrics
	log    *logBuf
	closed bool
}

// session creates a Session on c; tweak adjusts the options first.
func (c *cluster) session(t *testing.T, group, txnID string, topics []string, tweak func(*Options)) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry(), log: &logBuf{}}
	f.m = NewMetrics(f.reg)
	o := Options{
		Brokers:            c.brokers,
		Group:              group,
		Topics:             topics,
		TransactionalID:    txnID,
		SessionTimeout:     10 * time.Second,
		TransactionTimeout: 8 * time.Second,
		Logger:             slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Metrics:            f.m,
	}
	if tweak != nil {
		tweak(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.Session = s
	t.Cleanup(func() {
		if !f.closed {
			f.Session.Close()
		}
		if t.Failed() {
			t.Logf("log of session %s:\n%s", txnID, f.log)
		}
	})
	return f
}

func (f *fixture) Close() {
	f.closed = true
	f.Session.Close()
}

// init initialises the producer; kfake answers in milliseconds.
func (f *fixture) init(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Init(ctx); err != nil {
		t.Fatalf("Init: %v", err)
	}
}

// pollN polls until it has n records.
func (f *fixture) pollN(t *testing.T, n int) []*kgo.Record {
	t.Helper()
	return f.poll(t, n, false)
}

// poll polls until it has n records, and with attempt tells the session
// before each poll's records would run (Attempt).
func (f *fixture) poll(t *testing.T, n int, attempt bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for len(rs) < n {
		if ctx.Err() != nil {
			t.Fatalf("polled %d of %d records before timing out", len(rs), n)
		}
		fs := f.Poll(ctx, n-len(rs))
		if attempt {
			f.Attempt(ctx, fs)
		}
		rs = append(rs, fs.Records()...)
	}
	if len(rs) != n {
		t.Fatalf("polled %d records, want %d", len(rs), n)
	}
	return rs
}

func (f *fixture) begin(t *testing.T) {
	t.Helper()
	if err := f.Begin(context.Background()); err != nil {
		t.Fatalf("Begin: %v", err)
	}
}

// end ends the transaction and fails the test on an error.
func (f *fixture) end(t *testing.T, records int, abort Reason) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	committed, err := f.End(ctx, records, abort)
	if err != nil {
		t.Fatalf("End(%d, %q): %v", records, abort, err)
	}
	return committed
}

// copyTo produces one output record per input record to topic.
func (f *fixture) copyTo(topic string, in []*kgo.Record) {
	for _, r := range in {
		f.Produce(context.Background(), &kgo.Record{Topic: topic, Key: r.Key, Value: append([]byte("out-"), r.Value...)}, record.Source{})
	}
}

func (f *fixture) aborted(r Reason) float64 {
	return testutil.ToFloat64(f.m.Aborted.WithLabelValues(string(r)))
}

// abortedTotal sums the aborts over every reason.
func (f *fixture) abortedTotal() float64 {
	n := 0.0
	for _, r := range []Reason{ReasonRebalance, ReasonOffsetCommit, ReasonProduce, ReasonTransform, ReasonFenced, ReasonEndError, ReasonInjected, ReasonWatchdog, ReasonTimeout, ""} {
		n += f.aborted(r)
	}
	return n
}

// metric returns the first (for an unlabelled metric, the only) series of
// metric name in f's registry.
func (f *fixture) metric(t *testing.T, name string) *dto.Metric {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0]
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// histogram returns the sample count and sum of a histogram in f's registry.
func (f *fixture) histogram(t *testing.T, name string) (uint64, float64) {
	t.Helper()
	h := f.metric(t, name).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tooLarge is a value bigger than a produce batch may be (1 MB by
// default): the client fails such a record at once with MESSAGE_TOO_LARGE.
var tooLarge = make([]byte, 2<<20)

func TestNewRequiresMetrics(t *testing.T) {
	if _, err := New(Options{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"in"}, TransactionalID: "x"}); err == nil {
		t.Fatal("New without Metrics succeeded")
	}
}

func TestNewRejectsBadClientOptions(t *testing.T) {
	_, err := New(Options{Group: "g", Topics: []string{"in"}, TransactionalID: "x", Metrics: NewMetrics(prometheus.NewRegistry())})
	if err == nil || !strings.Contains(err.Error(), "creating the Kafka client") {
		t.Fatalf("New without brokers: %v, want a client creation error", err)
	}
}

// A transaction commits its output and its input offsets together, and
// the metrics count it.
func TestCommit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 2)
	c.createTopic(t, "out", 2)
	c.produce(t, "in", 10)
	f := c.session(t, "g", "tx-commit", []string{"in"}, nil)
	f.init(t)
	if f.Connecting() {
		t.Error("Connecting after Init returned")
	}
	in := f.pollN(t, 10)
	waitFor(t, "Ready", f.Ready)
	if n := testutil.ToFloat64(f.m.Rebalance); n != 1 {
		t.Errorf("rebalances_total after joining = %v, want 1", n)
	}
	epoch := f.AssignmentEpoch()
	if epoch == 0 {
		t.Error("AssignmentEpoch did not change on the first assignment")
	}
	// More callbacks in the same generation count no more rebalances.
	f.countRebalance(f.cl)
	if n := testutil.ToFloat64(f.m.Rebalance); n != 1 {
		t.Errorf("rebalances_total after a second callback in the same generation = %v, want 1", n)
	}

	if f.InTxn() {
		t.Error("InTxn before Begin")
	}
	before := time.Now()
	f.begin(t)
	if !f.InTxn() || f.Begun().Before(before) || f.Begun().After(time.Now()) {
		t.Errorf("after Begin: InTxn %v, Begun %v (began after %v)", f.InTxn(), f.Begun(), before)
	}
	f.copyTo("out", in)
	if !f.end(t, len(in), "") {
		t.Fatal("End did not commit")
	}
	if f.InTxn() {
		t.Error("InTxn after End")
	}
	if n := testutil.ToFloat64(f.m.Committed); n != 1 {
		t.Errorf("transactions_committed_total = %v, want 1", n)
	}
	if n := f.abortedTotal(); n != 0 {
		t.Errorf("transactions_aborted_total = %v, want 0", n)
	}
	if n, sum := f.histogram(t, "processor_transaction_records"); n != 1 || sum != 10 {
		t.Errorf("transaction_records: %d samples, sum %v; want 1, 10", n, sum)
	}
	if n, _ := f.histogram(t, "processor_transaction_duration_seconds"); n != 1 {
		t.Errorf("transaction_duration_seconds: %d samples, want 1", n)
	}
	if got := c.readAll(t, "out", true); len(got) != 10 {
		t.Errorf("read_committed output: %d records, want 10", len(got))
	}
	if n := c.committedOffsets("g", "in"); n != 10 {
		t.Errorf("committed offsets sum to %d, want 10", n)
	}
	if n := testutil.ToFloat64(f.m.Fenced); n != 0 {
		t.Errorf("producer_fenced_total = %v, want 0", n)
	}

	// Close leaves the group at once, without warnings.
	start := time.Now()
	f.Close()
	if d := time.Since(start); d >= closeTimeout {
		t.Errorf("Close took %s", d)
	}
	if gi := c.fake.GroupInfo("g"); gi != nil && len(gi.Members) != 0 {
		t.Errorf("group members after Close: %d, want 0", len(gi.Members))
	}
	if n := f.log.count("level=WARN"); n != 0 {
		t.Errorf("%d warnings logged:\n%s", n, f.log)
	}
	if n := f.log.count("connected to Kafka"); n != 0 {
		t.Errorf("Init succeeding at once logged a reconnection")
	}
}

// An abort asked for by the caller keeps the output from read_committed
// readers, counts the reason, and rewinds to the committed offsets. An
// injected abort flushes its records first, so they reach the log; any
// other abort drops what is still buffered.
func TestAbortReasons(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	c.produce(t, "in", 5)
	f := c.session(t, "g", "tx-abort", []string{"in"}, func(o *Options) {
		o.InstanceID = "member-a"
		// Records stay buffered until End flushes them, so what reaches
		// the log shows whether End flushed.
		o.ClientOpts = []kgo.Opt{kgo.ProducerLinger(time.Minute)}
	})
	f.init(t)
	waitFor(t, "Ready", f.Ready)
	gi := c.fake.GroupInfo("g")
	if gi == nil || len(gi.Members) != 1 || gi.Members[0].InstanceID == nil || *gi.Members[0].InstanceID != "member-a" {
		t.Errorf("group members: %+v, want one with instance ID member-a", gi)
	}

	in := f.pollN(t, 5)
	f.begin(t)
	f.copyTo("out", in)
	if f.end(t, len(in), ReasonTransform) {
		t.Fatal("an abort with reason transform_error committed")
	}
	if n := f.aborted(ReasonTransform); n != 1 {
		t.Errorf("aborted{transform_error} = %v, want 1", n)
	}
	if ends := c.endOffsets(t, "out"); ends[0] != 0 {
		t.Errorf("output end offset after a transform abort = %d, want 0 (nothing flushed)", ends[0])
	}
	if n, _ := f.histogram(t, "processor_transaction_duration_seconds"); n != 1 {
		t.Errorf("transaction_duration_seconds: %d samples, want 1", n)
	}
	if n, _ := f.histogram(t, "processor_transaction_records"); n != 0 {
		t.Errorf("transaction_records: %d samples, want 0 (aborts are not observed)", n)
	}

	// The aborted input comes again.
	again := f.pollN(t, 5)
	if again[0].Offset != in[0].Offset {
		t.Errorf("after the abort the session polled from offset %d, want %d", again[0].Offset, in[0].Offset)
	}
	f.begin(t)
	f.copyTo("out", again)
	if f.end(t, len(again), ReasonInjected) {
		t.Fatal("an injected abort committed")
	}
	if n := f.aborted(ReasonInjected); n != 1 {
		t.Errorf("aborted{injected} = %v, want 1", n)
	}
	if got := c.readAll(t, "out", false); len(got) != 5 {
		t.Errorf("read_uncommitted sees %d records of the injected abort, want 5", len(got))
	}
	if got := c.readAll(t, "out", true); len(got) != 0 {
		t.Errorf("read_committed sees %d records of aborted transactions, want 0", len(got))
	}
	if n := c.committedOffsets("g", "in"); n != 0 {
		t.Errorf("committed offsets after aborts: %d, want 0", n)
	}

	third := f.pollN(t, 5)
	f.begin(t)
	f.copyTo("out", third)
	if !f.end(t, len(third), "") {
		t.Fatal("End did not commit")
	}
	if got := c.readAll(t, "out", true); len(got) != 5 {
		t.Errorf("read_committed sees %d records, want 5", len(got))
	}
	if n := testutil.ToFloat64(f.m.Committed); n != 1 {
		t.Errorf("transactions_committed_total = %v, want 1", n)
	}
}

// A record that cannot be produced turns the commit into an abort; the
// failure is reported once and does not reach the next transaction.
func TestProduceFailure(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	c.produce(t, "in", 3)
	f := c.session(t, "g", "tx-produce", []string{"in"}, nil)
	f.init(t)
	in := f.pollN(t, 3)

	f.begin(t)
	f.copyTo("out", in[:1])
	big := &kgo.Record{Topic: "out", Key: []byte("big"), Value: tooLarge}
	f.Produce(context.Background(), big, record.Source{})
	if f.end(t, len(in), "") {
		t.Fatal("a transaction with a failed record committed")
	}
	if n := f.aborted(ReasonProduce); n != 1 {
		t.Errorf("aborted{produce_error} = %v, want 1", n)
	}
	if n := f.abortedTotal(); n != 1 {
		t.Errorf("transactions_aborted_total = %v, want 1", n)
	}
	if n := f.log.count("level=WARN", "could not be produced", "reason=produce_error"); n != 1 {
		t.Errorf("%d warnings about the failed record, want 1:\n%s", n, f.log)
	}
	fails := f.TakeFailures()
	if len(fails) != 1 || fails[0].Record != big || !errors.Is(fails[0].Err, kerr.MessageTooLarge) {
		t.Fatalf("TakeFailures = %+v, want the large record with MESSAGE_TOO_LARGE", fails)
	}
	if again := f.TakeFailures(); len(again) != 0 {
		t.Errorf("a second TakeFailures returned %d failures, want none", len(again))
	}
	if got := c.readAll(t, "out", true); len(got) != 0 {
		t.Errorf("read_committed sees %d records, want 0", len(got))
	}

	// The next transaction commits: the failure stayed in the last one.
	in = f.pollN(t, 3)
	f.begin(t)
	f.copyTo("out", in)
	if !f.end(t, len(in), "") {
		t.Fatal("the transaction after a failed one did not commit")
	}
	if fails := f.TakeFailures(); len(fails) != 0 {
		t.Errorf("TakeFailures after a clean transaction: %d", len(fails))
	}

	// At most 1000 failures are kept.
	f.begin(t)
	for range maxFailures + 1 {
		f.Produce(context.Background(), &kgo.Record{Topic: "out", Value: tooLarge}, record.Source{})
	}
	if f.end(t, 0, "") {
		t.Fatal("a transaction with failed records committed")
	}
	if n := len(f.TakeFailures()); n != maxFailures {
		t.Errorf("TakeFailures kept %d failures, want %d", n, maxFailures)
	}
	if n := f.aborted(ReasonProduce); n != 2 {
		t.Errorf("aborted{produce_error} = %v, want 2", n)
	}
}

// A produce that fails after the transaction timeout is counted as the
// broker's timeout, and a fencing met then is our own timeout, not another
// instance: it does not count towards the fatal second fence.
func TestTransactionTimeout(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	short := func(o *Options) { o.TransactionTimeout = time.Second }
	f := c.session(t, "g", "tx-timeout", []string{"in"}, short)
	f.init(t)

	f.begin(t)
	time.Sleep(1100 * time.Millisecond)
	f.Produce(context.Background(), &kgo.Record{Topic: "out", Value: tooLarge}, record.Source{})
	if f.end(t, 1, "") {
		t.Fatal("committed")
	}
	if n := f.aborted(ReasonTimeout); n != 1 {
		t.Errorf("aborted{timeout} = %v, want 1", n)
	}
	if n := f.aborted(ReasonProduce); n != 0 {
		t.Errorf("aborted{produce_error} = %v, want 0", n)
	}
	f.TakeFailures()

	// Another session with the same transactional ID fences f while f's
	// transaction is older than the transaction timeout.
	g := c.session(t, "g2", "tx-timeout", []string{"in"}, short)
	g.init(t)
	f.begin(t)
	time.Sleep(1100 * time.Millisecond)
	f.Produce(context.Background(), &kgo.Record{Topic: "out", Value: []byte("late")}, record.Source{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	committed, err := f.End(ctx, 1, "")
	if committed || err != nil {
		t.Fatalf("End after being fenced = %v, %v; want false, nil (rebuilt)", committed, err)
	}
	if n := f.aborted(ReasonTimeout); n != 2 {
		t.Errorf("aborted{timeout} = %v, want 2", n)
	}
	if n := testutil.ToFloat64(f.m.Fenced); n != 0 {
		t.Errorf("producer_fenced_total = %v, want 0: the fencing was our own timeout", n)
	}
	if !f.lastFence.IsZero() {
		t.Error("a timeout was remembered as a fencing")
	}
}

// An absorbed offset commit error aborts without an error and rewinds.
func TestOffsetCommitAbort(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	c.produce(t, "in", 4)
	f := c.session(t, "g", "tx-offsets", []string{"in"}, nil)
	f.init(t)
	in := f.pollN(t, 4)
	h := c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.RebalanceInProgress})
	f.begin(t)
	f.copyTo("out", in)
	if f.end(t, len(in), "") {
		t.Fatal("committed despite the offset commit error")
	}
	if h.Hits() == 0 {
		t.Fatal("the fault was never hit")
	}
	if n := f.aborted(ReasonOffsetCommit); n != 1 {
		t.Errorf("aborted{offset_commit} = %v, want 1", n)
	}
	if n := f.abortedTotal(); n != 1 {
		t.Errorf("transactions_aborted_total = %v, want 1", n)
	}
	again := f.pollN(t, 4)
	if again[0].Offset != in[0].Offset {
		t.Errorf("after the abort the session polled from offset %d, want %d", again[0].Offset, in[0].Offset)
	}
	f.begin(t)
	f.copyTo("out", again)
	if !f.end(t, len(again), "") {
		t.Fatal("did not commit after the fault")
	}
	if got := c.readAll(t, "out", true); len(got) != 4 {
		t.Errorf("read_committed sees %d records, want 4", len(got))
	}
}

// pollInBackground keeps f polling, so that it joins the group and stays
// in it, until the returned function is called.
func pollInBackground(f *fixture) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			f.Poll(ctx, 100)
		}
	}()
	return func() { cancel(); <-polled }
}

// rebalanceMidTransaction opens a transaction on session tx-a of group g
// holding the n records of topic in (of the given partitions), copied to
// out, and then has a second member, tx-b, join the group and keep polling
// until the test ends. It returns a, its records and its assignment epoch
// from before the join.
func rebalanceMidTransaction(t *testing.T, partitions int32, n int) (*cluster, *fixture, []*kgo.Record, uint64) {
	t.Helper()
	c := newCluster(t)
	c.createTopic(t, "in", partitions)
	c.createTopic(t, "out", 1)
	c.produce(t, "in", n)
	a := c.session(t, "g", "tx-a", []string{"in"}, nil)
	a.init(t)
	in := a.pollN(t, n)
	epoch := a.AssignmentEpoch()
	a.begin(t)
	a.copyTo("out", in)

	b := c.session(t, "g", "tx-b", []string{"in"}, nil)
	b.init(t)
	t.Cleanup(pollInBackground(b))
	return c, a, in, epoch
}

// Partitions revoked mid-transaction abort it with reason rebalance.
func TestRebalanceAbort(t *testing.T) {
	t.Parallel()
	c, a, in, epoch := rebalanceMidTransaction(t, 2, 20)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if _, err := c.fake.WaitGroupInfo(wctx, "g", func(gi *kfake.GroupInfo) bool {
		return gi.State == "Stable" && len(gi.Members) == 2 && gi.Members[0].NumAssigned() == 1 && gi.Members[1].NumAssigned() == 1
	}); err != nil {
		t.Fatalf("waiting for the second member's assignment: %v", err)
	}
	waitFor(t, "the revocation", a.rebalanced.Load)

	if a.end(t, len(in), "") {
		t.Fatal("committed across a rebalance")
	}
	if n := a.aborted(ReasonRebalance); n != 1 {
		t.Errorf("aborted{rebalance} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(a.m.Rebalance); n < 2 {
		t.Errorf("rebalances_total = %v, want at least 2", n)
	}
	if a.AssignmentEpoch() == epoch {
		t.Error("AssignmentEpoch unchanged by the rebalance")
	}
	if a.rebalanced.Load() {
		t.Error("the rebalance flag outlived End")
	}
}

// A rebalance that takes nothing from this member (a second member joins
// and gets nothing: the topic has one partition) does not spoil its open
// transaction. The cooperative balancer still calls OnPartitionsRevoked,
// with nothing in it, at the end of the old generation.
func TestRebalanceTakingNothing(t *testing.T) {
	t.Parallel()
	c, a, in, epoch := rebalanceMidTransaction(t, 1, 5)
	// a's (empty) revocation comes before its assignment in the new
	// generation, which moves its epoch.
	waitFor(t, "a's assignment in the new generation", func() bool { return a.AssignmentEpoch() > epoch })
	if a.rebalanced.Load() {
		t.Error("a rebalance that revoked nothing marked the transaction")
	}
	if !a.end(t, len(in), "") {
		t.Fatal("a rebalance that took nothing aborted the transaction")
	}
	if n := testutil.ToFloat64(a.m.Rebalance); n != 2 {
		t.Errorf("rebalances_total = %v, want 2 (two generations)", n)
	}
	if got := c.readAll(t, "out", true); len(got) != 5 {
		t.Errorf("read_committed sees %d records, want 5", len(got))
	}
}

// A failed EndTxn leaves the outcome unknown: End rebuilds the session and
// returns no error; the next transaction commits.
func TestEndErrorRebuilds(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	c.produce(t, "in", 3)
	f := c.session(t, "g", "tx-end", []string{"in"}, nil)
	f.init(t)
	in := f.pollN(t, 3)
	old, epoch := f.cl, f.AssignmentEpoch()
	h := c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.InvalidTxnState, TopLevel: true})
	f.begin(t)
	f.copyTo("out", in)
	if f.end(t, len(in), "") {
		t.Fatal("committed despite the EndTxn error")
	}
	if h.Hits() == 0 {
		t.Fatal("the fault was never hit")
	}
	if n := f.aborted(ReasonEndError); n != 1 {
		t.Errorf("aborted{end_error} = %v, want 1", n)
	}
	if f.cl == old {
		t.Error("the client was not replaced")
	}
	if f.AssignmentEpoch() == epoch {
		t.Error("AssignmentEpoch unchanged by the rebuild")
	}
	if n := f.log.count("level=WARN", "rebuilding the session", "reason=end_error"); n != 1 {
		t.Errorf("%d warnings about the rebuild, want 1", n)
	}
	in = f.pollN(t, 3)
	f.begin(t)
	f.copyTo("out", in)
	if !f.end(t, len(in), "") {
		t.Fatal("did not commit after the rebuild")
	}
	if got := c.readAll(t, "out", true); len(got) != 3 {
		t.Errorf("read_committed sees %d records, want 3", len(got))
	}
}

// End returns ctx's error when ending failed and ctx is done: no rebuild.
func TestEndErrorWithCanceledContext(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	f := c.session(t, "g", "tx-cancel", []string{"in"}, nil)
	f.init(t)
	old := f.cl
	c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.InvalidTxnState, TopLevel: true})
	f.begin(t)
	f.Produce(context.Background(), &kgo.Record{Topic: "out", Value: []byte("x")}, record.Source{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	committed, err := f.End(ctx, 1, "")
	if committed || !errors.Is(err, context.Canceled) {
		t.Fatalf("End = %v, %v; want false and context.Canceled", committed, err)
	}
	if f.cl != old {
		t.Error("the session was rebuilt despite the canceled context")
	}
}

// Begin on a producer that cannot begin rebuilds and returns ErrRebuilt.
func TestBeginFailureRebuilds(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	f := c.session(t, "g", "tx-begin", []string{"in"}, nil)
	f.init(t)
	old := f.cl
	f.begin(t)
	// A second Begin without End is refused by the client.
	if err := f.Begin(context.Background()); !errors.Is(err, ErrRebuilt) {
		t.Fatalf("Begin on an open transaction = %v, want ErrRebuilt", err)
	}
	if f.cl == old {
		t.Error("the client was not replaced")
	}
	if n := f.aborted(ReasonEndError); n != 1 {
		t.Errorf("aborted{end_error} = %v, want 1", n)
	}
	f.begin(t)
	f.Produce(context.Background(), &kgo.Record{Topic: "out", Value: []byte("x")}, record.Source{})
	if !f.end(t, 0, "") {
		t.Fatal("did not commit after the rebuild")
	}
}

// Being fenced once rebuilds the session; being fenced again within the
// fence window means another live instance has our transactional ID.
func TestFencedTwice(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	a := c.session(t, "ga", "tx-shared", []string{"in"}, nil)
	a.init(t)
	b := c.session(t, "gb", "tx-shared", []string{"in"}, nil)
	b.init(t) // fences a

	// txn runs one transaction of one record on f and returns End's error.
	txn := func(f *fixture, v string) error {
		t.Helper()
		f.begin(t)
		f.Produce(context.Background(), &kgo.Record{Topic: "out", Value: []byte(v)}, record.Source{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		committed, err := f.End(ctx, 1, "")
		if committed {
			t.Fatalf("a fenced producer committed %s", v)
		}
		f.TakeFailures()
		return err
	}
	if err := txn(a, "a1"); err != nil {
		t.Fatalf("first fencing of a: %v, want a rebuild", err)
	}
	if n := testutil.ToFloat64(a.m.Fenced); n != 1 {
		t.Errorf("a: producer_fenced_total = %v, want 1", n)
	}
	if n := a.aborted(ReasonFenced); n != 1 {
		t.Errorf("a: aborted{fenced} = %v, want 1", n)
	}
	if err := txn(b, "b1"); err != nil { // a's rebuild fenced b
		t.Fatalf("first fencing of b: %v, want a rebuild", err)
	}
	err := txn(a, "a2") // b's rebuild fenced a again
	var fe *FencedError
	if !errors.As(err, &fe) {
		t.Fatalf("second fencing of a: %v, want a *FencedError", err)
	}
	if fe.TransactionalID != "tx-shared" || fe.Window != 10*time.Minute || !IsFenced(fe) {
		t.Errorf("FencedError = %+v", fe)
	}
	if !strings.Contains(err.Error(), `transactional ID "tx-shared"`) || !strings.Contains(err.Error(), "10m0s") {
		t.Errorf("FencedError message: %s", err)
	}
	if n := testutil.ToFloat64(a.m.Fenced); n != 2 {
		t.Errorf("a: producer_fenced_total = %v, want 2", n)
	}
	if n := a.aborted(ReasonFenced); n != 2 {
		t.Errorf("a: aborted{fenced} = %v, want 2", n)
	}
	if got := c.readAll(t, "out", true); len(got) != 0 {
		t.Errorf("read_committed sees %v from fenced producers", got)
	}
}

// Init retries what a retry can fix, with a growing backoff (a wait drawn
// below 500ms, then below 1s), waits what it says, and returns what it
// cannot.
func TestInit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)

	t.Run("retries", func(t *testing.T) {
		h := c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TxnID: "tx-retry", Err: kerr.NotEnoughReplicas, Count: 2})
		f := c.session(t, "g-retry", "tx-retry", []string{"in"}, nil)
		start := time.Now()
		f.init(t)
		took := time.Since(start)
		if h.Hits() != 2 {
			t.Errorf("the fault was hit %d times, want 2", h.Hits())
		}
		first := f.log.retryIn(t, "level=WARN", "retrying", "attempt=1 ")
		second := f.log.retryIn(t, "level=WARN", "retrying", "attempt=2 ")
		if first < 0 || first > 500*time.Millisecond || second < 0 || second > time.Second {
			t.Errorf("retry_in %s then %s; want at most 500ms, then at most 1s", first, second)
		}
		if took < first+second {
			t.Errorf("Init returned after %s; its two retries said they would wait %s and %s", took, first, second)
		}
		if n := f.log.count("level=INFO", "connected to Kafka"); n != 1 {
			t.Errorf("%d lines saying the producer is initialised after retries, want 1", n)
		}
		if f.Connecting() {
			t.Error("Connecting after Init returned")
		}
	})
	for _, tc := range []struct {
		err  *kerr.Error
		want string
	}{
		{kerr.InvalidTransactionTimeout, "rejects transaction timeout 8s"},
		{kerr.TransactionalIDAuthorizationFailed, `not authorized to use transactional ID "tx-TRANSACTIONAL_ID_AUTHORIZATION_FAILED"`},
		{kerr.ClusterAuthorizationFailed, "not authorized"},
	} {
		t.Run(tc.err.Message, func(t *testing.T) {
			id := "tx-" + tc.err.Message
			c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TxnID: id, Err: tc.err})
			f := c.session(t, "g-"+tc.err.Message, id, []string{"in"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := f.Init(ctx)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Init = %v, want %v saying %q", err, tc.err, tc.want)
			}
			if f.Ready() {
				t.Error("Ready after a failed Init")
			}
		})
	}
}

// Init gives up when its context ends, and says it is connecting meanwhile.
func TestInitUnreachable(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s, err := New(Options{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"in"}, TransactionalID: "x",
		SessionTimeout: 10 * time.Second, TransactionTimeout: 8 * time.Second, Metrics: NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Init(ctx) }()
	for connecting := false; !connecting; {
		select {
		case err = <-done:
			t.Fatalf("Init returned %v before it was seen connecting", err)
		default:
			connecting = s.Connecting()
			time.Sleep(time.Millisecond)
		}
	}
	if err = <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Init = %v, want context.DeadlineExceeded", err)
	}
	if s.Connecting() || s.Ready() {
		t.Errorf("after Init gave up: Connecting %v, Ready %v", s.Connecting(), s.Ready())
	}
}

func TestMissingTopics(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	f := c.session(t, "g", "tx-missing", []string{"in"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := f.MissingTopics(ctx, nil); got != nil || err != nil {
		t.Errorf("MissingTopics(nil) = %v, %v", got, err)
	}
	got, err := f.MissingTopics(ctx, []string{"out", "nope", "in", "gone"})
	if err != nil || strings.Join(got, ",") != "nope,gone" {
		t.Errorf("MissingTopics = %v, %v; want [nope gone]", got, err)
	}
	if got, err := f.MissingTopics(ctx, []string{"in", "out"}); got != nil || err != nil {
		t.Errorf("MissingTopics of existing topics = %v, %v", got, err)
	}
	// A topic created right after it was reported missing is found at
	// once: the answer comes from a fresh metadata request, not a cache.
	c.createTopic(t, "gone", 1)
	if got, err := f.MissingTopics(ctx, []string{"gone"}); got != nil || err != nil {
		t.Errorf("MissingTopics of a topic created a moment ago = %v, %v; want it found", got, err)
	}
	// (A topic not asked for before: the client answers repeated
	// metadata requests from a short-lived cache.)
	dead, cancelDead := context.WithCancel(context.Background())
	cancelDead()
	if _, err := f.MissingTopics(dead, []string{"never-asked"}); err == nil || !strings.Contains(err.Error(), "listing topics") {
		t.Errorf("MissingTopics with a canceled context: %v, want a listing error", err)
	}
}

// Poll does not log the errors that only mean the caller stopped.
func TestPollQuietOnShutdown(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	f := c.session(t, "g", "tx-poll", []string{"in"}, nil)
	f.init(t)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	f.Poll(canceled, 10)
	expired, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	f.Poll(expired, 10)
	f.Close()
	f.Poll(context.Background(), 10)
	if n := f.log.count("fetch error"); n != 0 {
		t.Errorf("%d fetch errors logged:\n%s", n, f.log)
	}
}

// Close gives up on a coordinator that does not answer, after a bounded
// wait, and says so.
func TestCloseUnresponsiveCoordinator(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.produce(t, "in", 1)
	f := c.session(t, "g", "tx-close", []string{"in"}, nil)
	f.init(t)
	f.pollN(t, 1)
	// Swallow every LeaveGroup: no answer ever comes.
	c.fake.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.fake.KeepControl()
		return nil, nil, true
	})
	start := time.Now()
	f.Close()
	d := time.Since(start)
	if d < closeTimeout || d > 3*closeTimeout {
		t.Errorf("Close took %s, want about %s to %s", d, closeTimeout, 2*closeTimeout)
	}
	if n := f.log.count("level=WARN", "leaving the group timed out"); n != 1 {
		t.Errorf("%d warnings about leaving, want 1:\n%s", n, f.log)
	}
}

// A Session without a logger logs nowhere, and works.
func TestNilLogger(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	f := c.session(t, "g", "tx-nolog", []string{"in"}, func(o *Options) { o.Logger = nil })
	f.init(t)
	f.begin(t)
	f.Produce(context.Background(), &kgo.Record{Topic: "out", Value: tooLarge}, record.Source{})
	if f.end(t, 1, "") { // logs a warning
		t.Fatal("committed a failed record")
	}
}

func TestKgoLogger(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  kgo.LogLevel
	}{
		{slog.LevelDebug, kgo.LogLevelInfo},
		{slog.LevelInfo, kgo.LogLevelWarn},
		{slog.LevelWarn, kgo.LogLevelWarn},
		{slog.LevelError, kgo.LogLevelError},
	} {
		k, _ := kgoLoggerAt(tc.level)
		if got := k.Level(); got != tc.want {
			t.Errorf("Level with slog %v = %v, want %v", tc.level, got, tc.want)
		}
	}
	k, lb := kgoLoggerAt(slog.LevelDebug)
	k.Log(kgo.LogLevelError, "e", "k", 1)
	k.Log(kgo.LogLevelWarn, "w")
	k.Log(kgo.LogLevelInfo, "i")
	k.Log(kgo.LogLevelDebug, "d")
	lb.checkHas(t,
		`level=ERROR msg="kafka client: e" k=1`,
		`level=WARN msg="kafka client: w"`,
		`level=DEBUG msg="kafka client: i"`,
		`level=DEBUG msg="kafka client: d"`,
	)
}

// kgoLoggerAt returns a kgoLogger logging at level and up into a new
// logBuf.
func kgoLoggerAt(level slog.Level) (kgoLogger, *logBuf) {
	lb := &logBuf{}
	return kgoLogger{slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: level}))}, lb
}

// checkHas fails the test for each of wants the log does not contain.
func (l *logBuf) checkHas(t *testing.T, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(l.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, l)
		}
	}
}

func TestCountRebalanceOutsideAGroup(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	s := &Session{m: m}
	s.assignGen.Store(-1)
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Without a group the generation is -1 every time; each call counts.
	s.countRebalance(cl)
	s.countRebalance(cl)
	if n := testutil.ToFloat64(m.Rebalance); n != 2 {
		t.Errorf("rebalances_total = %v, want 2", n)
	}
	if s.AssignmentEpoch() != 2 {
		t.Errorf("AssignmentEpoch = %d, want 2", s.AssignmentEpoch())
	}
}
