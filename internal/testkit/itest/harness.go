// Package itest is the harness of the integration tests (the packages
// under integration/): it runs the processor against Kafka brokers over
// TCP, an embedded kfake cluster that each test starts and, when
// PROCESSOR_TEST_BROKERS is set, a real Apache Kafka cluster as well;
// in process (Target.Start, an Instance built as the processor's Main
// builds it) or as the built binary (Target.StartBinary, RunBinary). It
// checks what they wrote: exactly once and in order per key
// (CheckExactlyOnce), and with eoscheck (Target.Audit). Only tests
// import it.
package itest

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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

// Target is one broker cluster a test runs against (see package
// kafkatest): a kfake cluster of three brokers, the cluster of
// PROCESSOR_TEST_BROKERS, or one a test starts itself.
type Target struct {
	*kafkatest.Cluster
}

// FakeOpts are the options of every test's kfake cluster.
var FakeOpts = []kfake.Opt{kfake.NumBrokers(3), kfake.ClusterID("integration")}

// ForEachTarget runs fn against a fresh kfake cluster and, when
// PROCESSOR_TEST_BROKERS is set, against that cluster too.
func ForEachTarget(t *testing.T, fn func(t *testing.T, tg *Target)) {
	t.Helper()
	kafkatest.ForEach(t, FakeOpts, func(t *testing.T, c *kafkatest.Cluster) { fn(t, &Target{c}) })
}

// NewFake is a target on a fresh kfake cluster of its own (FakeOpts),
// closed when the test ends.
func NewFake(t testing.TB) *Target {
	t.Helper()
	return &Target{kafkatest.NewFake(t, FakeOpts...)}
}

// NewTarget is a target of brokers already running, reached with conn.
func NewTarget(t testing.TB, name string, brokers []string, conn ...kgo.Opt) *Target {
	return &Target{kafkatest.New(t, name, brokers, conn...)}
}

// Unique returns a name no earlier run used, so tests can share a real
// cluster.
func Unique(prefix string) string { return kafkatest.Unique(prefix) }

// NewTopics creates topics with the broker's default settings.
func (tg *Target) NewTopics(t testing.TB, partitions int32, topics ...string) {
	t.Helper()
	tg.CreateTopics(t, partitions, nil, topics...)
}

// CreateTopicWithConfigs creates topics with the given topic configs (e.g.
// max.message.bytes), failing the test with the broker's answer.
func (tg *Target) CreateTopicWithConfigs(t testing.TB, partitions int32, configs map[string]string, topics ...string) {
	t.Helper()
	tg.CreateTopics(t, partitions, configs, topics...)
}

// Input is a keyed input data set: value "k<key>:<seq>", seq counting per
// key, so output can be checked for exactly-once and per-key order.
type Input struct {
	Topic string
	N     int
	Keys  int
}

// Record is input record i: key k<i mod Keys>, value k<key>:<seq>.
func (in Input) Record(i int) *kgo.Record {
	k := i % in.Keys
	seq := i / in.Keys
	return &kgo.Record{
		Topic: in.Topic,
		Key:   []byte("k" + strconv.Itoa(k)),
		Value: []byte("k" + strconv.Itoa(k) + ":" + strconv.Itoa(seq)),
	}
}

// Deadlines of waits on a broker that have no bound of their own: each
// fails the test with a message naming what it waited for, never by go
// test's global timeout.
const (
	ProduceTimeout = 60 * time.Second // writing one call's worth of test input
	produceGrace   = 10 * time.Second // then for records already sent, which the deadline does not fail
	FeedTimeout    = 2 * time.Minute  // a goroutine feeding input while instances run
)

// Context returns a context that ends after d, when t ends, or at t's
// cleanup, whichever comes first. Call it from the test's goroutine.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// WaitClosed waits up to d for ch to be closed, failing the test with a
// message naming what it waited for if it is not. Call it from the test's
// goroutine.
func WaitClosed(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// Produce writes records [from, to) of the input, idempotently, in order,
// and reports whether every one was acknowledged. It may be called from any
// goroutine: a failure, or records not acknowledged within ProduceTimeout
// (a dead broker is retried until then), is reported with t.Errorf, unless
// the test has already ended.
func (tg *Target) Produce(t testing.TB, in Input, from, to int) bool {
	t.Helper()
	cl, err := kgo.NewClient(tg.ClientOpts(kgo.ProducerLinger(2 * time.Millisecond))...)
	if err != nil {
		t.Error(err)
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), ProduceTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	var acked atomic.Int64
	for i := from; i < to; i++ {
		wg.Add(1)
		cl.Produce(ctx, in.Record(i), func(_ *kgo.Record, err error) {
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
				in.Topic, from, to, acked.Load(), to-from, produceGrace, ProduceTimeout)
		}
		return false
	}
	if firstErr == nil {
		return true
	}
	switch {
	case t.Context().Err() != nil: // the test has ended: nobody to tell
	case ctx.Err() != nil:
		t.Errorf("producing %s records [%d, %d): %d of %d acknowledged within %s: %v", in.Topic, from, to, acked.Load(), to-from, ProduceTimeout, firstErr)
	default:
		t.Errorf("producing %s records [%d, %d): %d of %d acknowledged: %v", in.Topic, from, to, acked.Load(), to-from, firstErr)
	}
	return false
}

// Instance is one in-process processor, built as Main builds it
// (app.Prepare, then Build): a session, a chain and a pipeline, and the
// metrics they report through.
type Instance struct {
	Pipeline        *pipeline.Pipeline
	TxnMetrics      *txn.Metrics
	PipelineMetrics *pipeline.Metrics
	Cancel          context.CancelFunc
	Done            chan struct{}
	Err             error
	Stopped         bool
}

// InstanceOpts are the settings a test gives an instance; unset ones are
// the harness's defaults (see instanceConfig), then the processor's own.
type InstanceOpts struct {
	Group, TxnID, Out string
	Topics            []string
	instanceID        string
	Chain             *transform.Chain
	InjectAbort       func(uint64) bool
	CommitInterval    time.Duration
	MaxRecords        int
	OnError           pipeline.OnError
	DLQTopic          string
	TxnBudget         time.Duration
	FailingAfter      time.Duration // a run of aborts this long is unhealthy; default the processor's
	NoLineage         bool
	MaxTxnBytes       int64
	TxnTimeout        time.Duration // default 8s; the session timeout is 2s more
	transformTimeout  time.Duration
	Configure         func(*config.Config) // last: e.g. TLS and SASL settings
	// db is the postgres sink's database: the instance then writes there
	// (PROCESSOR_SINK=postgres) instead of to out.
	DB *pgsink.Sink
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
func (tg *Target) instanceConfig(t testing.TB, o InstanceOpts) *config.Config {
	t.Helper()
	cfg := defaultConfig(t)
	cfg.Brokers = tg.Brokers
	cfg.Group = o.Group
	cfg.InputTopics = o.Topics
	cfg.OutputTopic = o.Out
	cfg.TransactionalID = o.TxnID
	cfg.InstanceID = o.instanceID
	cfg.MaxRecordsPerTxn = cmp.Or(o.MaxRecords, 2000)
	cfg.TransactionTimeout = cmp.Or(o.TxnTimeout, 8*time.Second)
	cfg.SessionTimeout = cfg.TransactionTimeout + 2*time.Second
	if o.NoLineage {
		cfg.LineageHeaders = "off"
	}
	cfg.DLQTopic = o.DLQTopic
	if o.CommitInterval > 0 {
		cfg.CommitInterval = o.CommitInterval
	}
	if o.OnError != "" {
		cfg.OnError = string(o.OnError)
	}
	if o.MaxTxnBytes > 0 {
		cfg.MaxTxnBytes = bytesize.Size(o.MaxTxnBytes)
	}
	if o.transformTimeout > 0 {
		cfg.TransformTimeout = o.transformTimeout
	}
	if o.DB != nil {
		cfg.Sink = "postgres"
	}
	if o.Configure != nil {
		o.Configure(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the instance's configuration: %v", err)
	}
	return cfg
}

// SettingsLookup gives a chain's entries the settings in m, by setting
// name (e.g. "HEADER"), as the processor gives them its
// PROCESSOR_<NAME>_<SETTING> variables.
func SettingsLookup(m map[string]string) transform.Lookup {
	return func(_ transform.Entry, setting string) (string, bool) {
		v, ok := m[setting]
		return v, ok
	}
}

// Start runs a processor instance until stop or a fatal error. It is built
// as the binary builds one (app.Prepare, then Build), from
// tg.instanceConfig(o), with the identity chain unless o has one.
func (tg *Target) Start(t testing.TB, o InstanceOpts) *Instance {
	t.Helper()
	if o.Chain == nil {
		o.Chain = identityChain(t)
	}
	pr, err := app.Prepare(tg.instanceConfig(t, o), []*transform.Chain{o.Chain}, testLogger(t, o.TxnID),
		app.Overrides{TxnBudget: o.TxnBudget, FailingAfter: o.FailingAfter, InjectAbort: o.InjectAbort})
	if err != nil {
		t.Fatal(err)
	}
	built, err := pr.Build(tg.Brokers, o.DB, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &Instance{Pipeline: built.Pipeline, TxnMetrics: built.Metrics.Txn, PipelineMetrics: built.Metrics.Pipeline, Cancel: cancel, Done: make(chan struct{})}
	go func() {
		defer close(in.Done)
		in.Err = built.Run(ctx)
	}()
	t.Cleanup(func() { in.Stop(t) })
	return in
}

// Stop shuts the instance down cleanly and fails the test if it had failed.
func (in *Instance) Stop(t testing.TB) {
	t.Helper()
	if in.Stopped {
		return
	}
	in.Stopped = true
	in.Cancel()
	select {
	case <-in.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("instance did not stop within 30s")
	}
	if in.Err != nil {
		t.Errorf("instance failed: %v", in.Err)
	}
}

// WaitFor polls cond until it holds or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitCaughtUp waits until group has committed all of topic, failing at
// once if one of the running instances dies.
func (tg *Target) WaitCaughtUp(t testing.TB, group, topic string, running ...*Instance) {
	t.Helper()
	tg.WaitCaughtUpWithin(t, 90*time.Second, group, topic, running...)
}

// WaitCaughtUpWithin is WaitCaughtUp with the caller's deadline.
func (tg *Target) WaitCaughtUpWithin(t testing.TB, timeout time.Duration, group, topic string, running ...*Instance) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, behind := tg.CaughtUp(t, group, topic)
		if ok {
			return
		}
		for _, in := range running {
			select {
			case <-in.Done:
				in.Stopped = true
				t.Fatalf("an instance stopped before the group caught up on %s: %v (%s)", topic, in.Err, FmtStats(running...))
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group did not catch up on %s within %s (behind: %s; %s)", topic, timeout, behind, FmtStats(running...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// IsCaughtUp reports whether group's committed offsets reached the end of
// every partition of topic (kafkatest.Cluster.CaughtUp).
func (tg *Target) IsCaughtUp(t testing.TB, group, topic string) bool {
	t.Helper()
	ok, _ := tg.CaughtUp(t, group, topic)
	return ok
}
