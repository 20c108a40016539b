// Package integration runs the processor against Kafka brokers over TCP:
// an embedded kfake cluster that each test starts, and, when
// PROCESSOR_TEST_BROKERS is set, a real Apache Kafka cluster as well.
package integration

import (
	"cmp"
	"context"
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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/bytesize"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/identity"
	"github.com/streamproc/processor/txn"
)

// target is one broker cluster a test runs against (see package
// kafkatest): a kfake cluster of three brokers, the cluster of
// PROCESSOR_TEST_BROKERS, or one a test starts itself.
type target struct {
	*kafkatest.Cluster
}

// fakeOpts are the options of every test's kfake cluster.
var fakeOpts = []kfake.Opt{kfake.NumBrokers(3), kfake.ClusterID("integration")}

// forEachTarget runs fn against a fresh kfake cluster and, when
// PROCESSOR_TEST_BROKERS is set, against that cluster too.
func forEachTarget(t *testing.T, fn func(t *testing.T, tg *target)) {
	t.Helper()
	kafkatest.ForEach(t, fakeOpts, func(t *testing.T, c *kafkatest.Cluster) { fn(t, &target{c}) })
}

func newFake(t testing.TB) *target {
	t.Helper()
	return &target{kafkatest.NewFake(t, fakeOpts...)}
}

// newTarget is a target of brokers already running, reached with conn.
func newTarget(t testing.TB, name string, brokers []string, conn ...kgo.Opt) *target {
	return &target{kafkatest.New(t, name, brokers, conn...)}
}

// unique returns a name no earlier run used, so tests can share a real
// cluster.
func unique(prefix string) string { return kafkatest.Unique(prefix) }

// clientOpts are the options of a test client of tg: its brokers, how to
// reach them, then more.
func (tg *target) clientOpts(more ...kgo.Opt) []kgo.Opt { return tg.ClientOpts(more...) }

func (tg *target) admin(t testing.TB) *kadm.Client {
	t.Helper()
	return tg.Admin(t)
}

// createTopics creates topics with the broker's default settings.
func (tg *target) createTopics(t testing.TB, partitions int32, topics ...string) {
	t.Helper()
	tg.CreateTopics(t, partitions, nil, topics...)
}

// createTopicWithConfigs creates topics with the given topic configs (e.g.
// max.message.bytes), failing the test with the broker's answer.
func (tg *target) createTopicWithConfigs(t testing.TB, partitions int32, configs map[string]string, topics ...string) {
	t.Helper()
	tg.CreateTopics(t, partitions, configs, topics...)
}

// input is a keyed input data set: value "k<key>:<seq>", seq counting per
// key, so output can be checked for exactly-once and per-key order.
type input struct {
	topic string
	n     int
	keys  int
}

func (in input) record(i int) *kgo.Record {
	k := i % in.keys
	seq := i / in.keys
	return &kgo.Record{
		Topic: in.topic,
		Key:   []byte("k" + strconv.Itoa(k)),
		Value: []byte("k" + strconv.Itoa(k) + ":" + strconv.Itoa(seq)),
	}
}

// Deadlines of waits on a broker that have no bound of their own: each
// fails the test with a message naming what it waited for, never by go
// test's global timeout.
const (
	produceTimeout = 60 * time.Second // writing one call's worth of test input
	produceGrace   = 10 * time.Second // then for records already sent, which the deadline does not fail
	feedTimeout    = 2 * time.Minute  // a goroutine feeding input while instances run
)

// testContext returns a context that ends after d, when t ends, or at t's
// cleanup, whichever comes first. Call it from the test's goroutine.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitClosed waits up to d for ch to be closed, failing the test with a
// message naming what it waited for if it is not. Call it from the test's
// goroutine.
func waitClosed(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// produce writes records [from, to) of the input, idempotently, in order,
// and reports whether every one was acknowledged. It may be called from any
// goroutine: a failure, or records not acknowledged within produceTimeout
// (a dead broker is retried until then), is reported with t.Errorf, unless
// the test has already ended.
func (tg *target) produce(t testing.TB, in input, from, to int) bool {
	t.Helper()
	cl, err := kgo.NewClient(tg.clientOpts(kgo.ProducerLinger(2 * time.Millisecond))...)
	if err != nil {
		t.Error(err)
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), produceTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	var acked atomic.Int64
	for i := from; i < to; i++ {
		wg.Add(1)
		cl.Produce(ctx, in.record(i), func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			acked.Add(1)
		})
	}
	acknowledged := make(chan struct{})
	go func() {
		wg.Wait()
		close(acknowledged)
	}()
	// The deadline fails the records not yet sent; ones a broker holds
	// without answering are given up on a little later.
	dl, _ := ctx.Deadline()
	select {
	case <-acknowledged:
	case <-time.After(time.Until(dl) + produceGrace):
		if t.Context().Err() == nil {
			t.Errorf("producing %s records [%d, %d): %d of %d acknowledged, the rest unanswered %s after the %s deadline",
				in.topic, from, to, acked.Load(), to-from, produceGrace, produceTimeout)
		}
		return false
	}
	if firstErr == nil {
		return true
	}
	switch {
	case t.Context().Err() != nil: // the test has ended: nobody to tell
	case ctx.Err() != nil:
		t.Errorf("producing %s records [%d, %d): %d of %d acknowledged within %s: %v", in.topic, from, to, acked.Load(), to-from, produceTimeout, firstErr)
	default:
		t.Errorf("producing %s records [%d, %d): %d of %d acknowledged: %v", in.topic, from, to, acked.Load(), to-from, firstErr)
	}
	return false
}

// instance is one in-process processor, built as Main builds it
// (app.Prepare, then Build): a session, a chain and a pipeline, and the
// metrics they report through.
type instance struct {
	p       *pipeline.Pipeline
	tm      *txn.Metrics
	pm      *pipeline.Metrics
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	stopped bool
}

// instanceOpts are the settings a test gives an instance; unset ones are
// the harness's defaults (see instanceConfig), then the processor's own.
type instanceOpts struct {
	group, txnID, out string
	topics            []string
	instanceID        string
	chain             *transform.Chain
	injectAbort       func(uint64) bool
	commitInterval    time.Duration
	maxRecords        int
	onError           pipeline.OnError
	dlqTopic          string
	txnBudget         time.Duration
	failingAfter      time.Duration // a run of aborts this long is unhealthy; default the processor's
	noLineage         bool
	maxTxnBytes       int64
	txnTimeout        time.Duration // default 8s; the session timeout is 2s more
	transformTimeout  time.Duration
	configure         func(*config.Config) // last: e.g. TLS and SASL settings
	// db is the postgres sink's database: the instance then writes there
	// (PROCESSOR_SINK=postgres) instead of to out.
	db *pgsink.Sink
}

func testLogger(t testing.TB, name string) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("PROCESSOR_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level})).With("instance", name)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func identityChain(t testing.TB) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("identity", transform.Plain("", func() (transform.Transform, error) { return identity.Transform{}, nil }))
	c, err := reg.Build([]transform.Entry{{Name: "identity"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// defaultConfig returns the processor's configuration with every default
// as the binary applies it (config's declarations), read from no variable.
func defaultConfig(t testing.TB) *config.Config {
	t.Helper()
	return config.Defaults()
}

// instanceConfig returns the configuration of an instance with o's
// settings, on tg's brokers: the defaults of defaultConfig, except that the
// harness defaults to at most 2000 records per transaction and a
// transaction timeout of 8s (the session timeout 2s more), so that tests
// run in seconds. It validates, as config.Load's does.
func (tg *target) instanceConfig(t testing.TB, o instanceOpts) *config.Config {
	t.Helper()
	cfg := defaultConfig(t)
	cfg.Brokers = tg.Brokers
	cfg.Group = o.group
	cfg.InputTopics = o.topics
	cfg.OutputTopic = o.out
	cfg.TransactionalID = o.txnID
	cfg.InstanceID = o.instanceID
	cfg.MaxRecordsPerTxn = cmp.Or(o.maxRecords, 2000)
	cfg.TransactionTimeout = cmp.Or(o.txnTimeout, 8*time.Second)
	cfg.SessionTimeout = cfg.TransactionTimeout + 2*time.Second
	if o.noLineage {
		cfg.LineageHeaders = "off"
	}
	cfg.DLQTopic = o.dlqTopic
	if o.commitInterval > 0 {
		cfg.CommitInterval = o.commitInterval
	}
	if o.onError != "" {
		cfg.OnError = string(o.onError)
	}
	if o.maxTxnBytes > 0 {
		cfg.MaxTxnBytes = bytesize.Size(o.maxTxnBytes)
	}
	if o.transformTimeout > 0 {
		cfg.TransformTimeout = o.transformTimeout
	}
	if o.db != nil {
		cfg.Sink = "postgres"
	}
	if o.configure != nil {
		o.configure(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the instance's configuration: %v", err)
	}
	return cfg
}

// settingsLookup gives a chain's entries the settings in m, by setting
// name (e.g. "HEADER"), as the processor gives them its
// PROCESSOR_<NAME>_<SETTING> variables.
func settingsLookup(m map[string]string) transform.Lookup {
	return func(_ transform.Entry, setting string) (string, bool) {
		v, ok := m[setting]
		return v, ok
	}
}

// start runs a processor instance until stop or a fatal error. It is built
// as the binary builds one (app.Prepare, then Build), from
// tg.instanceConfig(o), with the identity chain unless o has one.
func (tg *target) start(t testing.TB, o instanceOpts) *instance {
	t.Helper()
	if o.chain == nil {
		o.chain = identityChain(t)
	}
	pr, err := app.Prepare(tg.instanceConfig(t, o), []*transform.Chain{o.chain}, testLogger(t, o.txnID),
		app.Overrides{TxnBudget: o.txnBudget, FailingAfter: o.failingAfter, InjectAbort: o.injectAbort})
	if err != nil {
		t.Fatal(err)
	}
	built, err := pr.Build(tg.Brokers, o.db, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{p: built.Pipeline, tm: built.Metrics.Txn, pm: built.Metrics.Pipeline, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(in.done)
		in.err = built.Run(ctx)
	}()
	t.Cleanup(func() { in.stop(t) })
	return in
}

// stop shuts the instance down cleanly and fails the test if it had failed.
func (in *instance) stop(t testing.TB) {
	t.Helper()
	if in.stopped {
		return
	}
	in.stopped = true
	in.cancel()
	select {
	case <-in.done:
	case <-time.After(30 * time.Second):
		t.Fatal("instance did not stop within 30s")
	}
	if in.err != nil {
		t.Errorf("instance failed: %v", in.err)
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCaughtUp waits until group has committed all of topic, failing at
// once if one of the running instances dies.
func (tg *target) waitCaughtUp(t testing.TB, group, topic string, running ...*instance) {
	t.Helper()
	tg.waitCaughtUpWithin(t, 90*time.Second, group, topic, running...)
}

// waitCaughtUpWithin is waitCaughtUp with the caller's deadline.
func (tg *target) waitCaughtUpWithin(t testing.TB, timeout time.Duration, group, topic string, running ...*instance) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, behind := tg.CaughtUp(t, group, topic)
		if ok {
			return
		}
		for _, in := range running {
			select {
			case <-in.done:
				in.stopped = true
				t.Fatalf("an instance stopped before the group caught up on %s: %v (%s)", topic, in.err, fmtStats(running...))
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group did not catch up on %s within %s (behind: %s; %s)", topic, timeout, behind, fmtStats(running...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// caughtUp reports whether group's committed offsets reached the end of
// every partition of topic (kafkatest.Cluster.CaughtUp).
func (tg *target) caughtUp(t testing.TB, group, topic string) bool {
	t.Helper()
	ok, _ := tg.CaughtUp(t, group, topic)
	return ok
}

// readAll reads topic from the start to its current end with the given
// isolation and returns the records.
func (tg *target) readAll(t testing.TB, topic string, committed bool) []*kgo.Record {
	t.Helper()
	return tg.ReadAll(t, topic, committed)
}

// checkExactlyOnce asserts that out holds every input exactly once with
// per-key order kept.
func checkExactlyOnce(t testing.TB, in input, out []*kgo.Record) {
	t.Helper()
	seen := make(map[string]int, in.n)
	lastSeq := map[string]int{}
	dups, order := 0, 0
	for _, r := range out {
		v := string(r.Value)
		seen[v]++
		if seen[v] > 1 {
			dups++
			continue
		}
		k, s, _ := strings.Cut(v, ":")
		if string(r.Key) != k {
			t.Errorf("record %q has key %q", v, r.Key)
		}
		seq, _ := strconv.Atoi(s)
		if last, ok := lastSeq[k]; ok && seq != last+1 {
			order++
		}
		lastSeq[k] = seq
	}
	lost := 0
	for i := 0; i < in.n; i++ {
		if seen[string(in.record(i).Value)] == 0 {
			lost++
		}
	}
	if dups > 0 || lost > 0 || order > 0 || len(out) != in.n {
		t.Errorf("exactly-once violated: %d outputs for %d inputs, %d duplicates, %d lost, %d per-key order breaks", len(out), in.n, dups, lost, order)
	}
}

func sumConsumed(ins ...*instance) uint64 {
	var n uint64
	for _, in := range ins {
		n += in.p.Stats().Consumed
	}
	return n
}

func fmtStats(ins ...*instance) string {
	var b strings.Builder
	for i, in := range ins {
		s := in.p.Stats()
		fmt.Fprintf(&b, "[%d: consumed %d commits %d aborts %d] ", i, s.Consumed, s.Commits, s.Aborts)
	}
	return b.String()
}

// audit runs eoscheck's reader and checker over a finished run and fails
// the test on any anomaly, printing its table.
func (tg *target) audit(t testing.TB, group string, inputs, outputs []string) {
	t.Helper()
	tg.auditWith(t, check.Source{Inputs: inputs, Outputs: outputs, Group: group}, check.Options{OneToOne: true, ExpectAll: true})
}

// auditWith reads a finished run from src (on tg's brokers) with
// eoscheck's reader, checks it with opts, fails the test on any anomaly,
// printing its table and examples, and returns the report.
func (tg *target) auditWith(t testing.TB, src check.Source, opts check.Options) check.Report {
	t.Helper()
	src.Brokers = tg.Brokers
	r, err := check.NewReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run, err := r.Read(ctx)
	if err != nil {
		t.Fatalf("eoscheck read: %v", err)
	}
	rep := check.Check(run, opts)
	if !rep.Clean() {
		t.Errorf("eoscheck found anomalies:\n%s%v", rep.Table(), rep.Examples)
	}
	return rep
}
