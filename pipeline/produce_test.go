package pipeline

// Loop tests of outputs and dead letters the cluster will not take: too
// large for their topic (the broker rejects the whole batch holding them),
// routed to a topic that does not exist, or dead letters for a dead-letter
// topic that does not exist. The real Pipeline on a session in memory
// (newMemEnv), which refuses them as a broker does; the case that reads
// the abort as the session records it on a real txn.Session against
// kfake, as in loop_test.go.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// tinyLimit is the max.message.bytes of the topics the tests make too
// small; bigSize is the size of what does not fit them.
const (
	tinyLimit = 10_000
	bigSize   = 20_000
)

// createTopic creates topic with configs and returns its name.
func (e *loopEnv) createTopic(topic string, partitions int32, configs map[string]string) string {
	e.t.Helper()
	if e.mem != nil {
		limit, _ := strconv.Atoi(configs["max.message.bytes"])
		e.mem.Create(topic, int(partitions), limit)
		return topic
	}
	e.c.CreateTopics(e.t, partitions, configs, topic)
	return topic
}

// produceRecords writes recs to the input topic and keeps them with their
// offsets, like produce.
func (e *loopEnv) produceRecords(recs ...*kgo.Record) {
	e.t.Helper()
	e.produceInputs(recs, kgo.DefaultProduceTopic(e.in))
}

// incompressible returns n random bytes: the producer compresses batches,
// and the broker measures the compressed batch.
func incompressible(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// lingering makes the session's producer hold records until End flushes
// them, so that each transaction's outputs to one partition travel in one
// batch, which the broker accepts or rejects as a whole.
func lingering(o *txn.Options) {
	o.ClientOpts = append(o.ClientOpts, kgo.ProducerLinger(time.Minute))
}

// startBatched is start with each transaction's outputs to one partition
// in one batch, which the cluster takes or refuses as a whole: a lingering
// producer on a real broker, oneBatch in memory.
func (e *loopEnv) startBatched(group, txnID string, chain *transform.Chain, o Options) *loopRun {
	e.t.Helper()
	if e.mem != nil {
		e.mem.OneBatch()
		return e.start(group, txnID, chain, o)
	}
	return e.startWith(group, txnID, chain, o, lingering)
}

// bigOutputs is a transform that passes records, except that the outputs
// of the inputs in big get a value too large for a tinyLimit topic.
func bigOutputs(big ...*kgo.Record) transform.Func {
	return func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		for i, b := range big {
			if string(r.Value) == string(b.Value) {
				r.Value = incompressible(bigSize, uint64(i))
			}
		}
		return append(out, r), nil
	}
}

// An output too large for its topic, in a batch with the outputs of other
// inputs, makes the broker reject the whole batch: the transaction aborts,
// transactions shrink to one input until the culprit fails alone, and its
// input then becomes a dead letter (failed transform "produce", the
// broker's error); every other input is output exactly once.
func TestLoopOutputTooLargeDeadLettered(t *testing.T) {
	e := newLoopEnv(t)
	tiny := e.createTopic("tiny", 1, map[string]string{"max.message.bytes": strconv.Itoa(tinyLimit)})
	const n, keys = 40, 4
	e.produce(n, keys)
	big := []*kgo.Record{e.inputs[7], e.inputs[23]}
	isBig := func(in *kgo.Record) bool { return in == big[0] || in == big[1] }
	run := e.startWith("g", "g-a", loopChain(t, bigOutputs(big...)),
		Options{OutputTopic: tiny, Lineage: true, OnError: DeadLetter, DLQTopic: e.dlq}, lingering)
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	if a := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonProduce))); a < 1 {
		t.Errorf("aborted{reason=produce_error} = %v, want at least 1", a)
	}
	e.checkTopic(tiny, e.read(tiny, true), func(in *kgo.Record) bool { return !isBig(in) })
	dead := e.read(e.dlq, true)
	e.checkTopic(e.dlq, dead, isBig)
	for _, d := range dead {
		msg, _ := header(d, record.HeaderError)
		stage, _ := header(d, record.HeaderErrorTransform)
		attempts, _ := header(d, record.HeaderErrorAttempts)
		if !strings.Contains(msg, "cannot be produced") || !strings.Contains(msg, "MESSAGE_TOO_LARGE") || stage != stageProduce || attempts != "1" {
			t.Errorf("dead letter %q: error %q, transform %q, attempts %q; want MESSAGE_TOO_LARGE, produce, 1", d.Value, msg, stage, attempts)
		}
		if _, dropped := header(d, record.HeaderErrorValueDropped); dropped != 0 {
			t.Errorf("dead letter %q has its value dropped", d.Value)
		}
	}
	st := run.p.Stats()
	if st.Consumed != n || st.Produced != n-2 {
		t.Errorf("Stats() = %+v, want %d consumed, %d produced", st, n, n-2)
	}
	if d := testutil.ToFloat64(run.pm.DLQ); d != 2 {
		t.Errorf("processor_records_dlq_total = %v, want 2", d)
	}
	status := run.p.Status()
	if status.LastError == nil || !strings.HasPrefix(status.LastError.Message, "transaction aborted (produce_error): an output record could not be produced: ") ||
		!strings.Contains(status.LastError.Message, "MESSAGE_TOO_LARGE") {
		t.Errorf("Status().LastError = %+v, want the last abort with the broker's error", status.LastError)
	}
	if a := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonProduce))); status.Aborts["produce_error"] != uint64(a) ||
		status.Commits != st.Commits || status.Consumed != n || status.Produced != n-2 {
		t.Errorf("Status() = aborts %v, %d commits, %d consumed, %d produced; want %v produce_error aborts and the counters of Stats() %+v",
			status.Aborts, status.Commits, status.Consumed, status.Produced, a, st)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
}

// Under the fail policy an output the broker rejects for good stops the
// processor at its input, once transactions have shrunk enough to tell it
// from the inputs batched with it: Run returns a *RecordError naming that
// input and wrapping the broker's error, and nothing from it on is
// committed on its partition.
func TestLoopOutputTooLargeFails(t *testing.T) {
	e := newMemEnv(t)
	tiny := e.createTopic("tiny", 1, map[string]string{"max.message.bytes": strconv.Itoa(tinyLimit)})
	const n, keys = 40, 4
	e.produce(n, keys)
	big := e.inputs[17]
	run := e.startBatched("g", "g-a", loopChain(t, bigOutputs(big)), Options{OutputTopic: tiny, Lineage: true})
	err := waitDone(t, run, 30*time.Second, "the fail policy must stop at the input whose output is too large")

	var re *RecordError
	want := record.Source{Topic: e.in, Partition: big.Partition, Offset: big.Offset}
	if !errors.As(err, &re) || re.Source != want || !errors.Is(err, kerr.MessageTooLarge) ||
		!strings.Contains(err.Error(), "its output cannot be produced to tiny") {
		t.Fatalf("Run returned %v, want a *RecordError for %+v wrapping MESSAGE_TOO_LARGE", err, want)
	}
	if h := run.p.Healthy(); h == nil {
		t.Error("Healthy() = nil after the failure")
	}
	e.checkStoppedAt(run, tiny, big)
}

// A failed record whose dead letter is too large for the dead-letter topic
// is dead-lettered again without its value, with the value-dropped header
// and still the transform's own error. One whose dead letter is too large
// even without its value (its key alone is) stops the processor with a
// *RecordError saying so.
func TestLoopDeadLetterTooLarge(t *testing.T) {
	e := newMemEnv(t)
	tinyDLQ := e.createTopic("tinydlq", 1, map[string]string{"max.message.bytes": strconv.Itoa(tinyLimit)})
	const n, keys = 30, 3
	e.produce(n/2, keys)
	bigA := &kgo.Record{Key: []byte("bigA"), Value: incompressible(bigSize, 1)}
	e.produceRecords(bigA)
	e.produce(n/2, keys)
	bigB := &kgo.Record{Key: []byte("bigB"), Value: incompressible(bigSize, 2)}
	e.produceRecords(bigB)
	isBig := func(in *kgo.Record) bool { return in == bigA || in == bigB }
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if len(r.Value) > 1000 || len(r.Key) > 1000 {
			return out, errors.New("record too big to transform")
		}
		return append(out, r), nil
	})
	run := e.startBatched("g", "g-a", chain, Options{Lineage: true, OnError: DeadLetter, DLQTopic: tinyDLQ})
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })

	e.checkTopic(e.out, e.read(e.out, true), func(in *kgo.Record) bool { return !isBig(in) })
	dead := e.read(tinyDLQ, true)
	got := map[string]bool{}
	for _, d := range dead {
		got[string(d.Key)] = true
		msg, _ := header(d, record.HeaderError)
		stage, _ := header(d, record.HeaderErrorTransform)
		dropped, _ := header(d, record.HeaderErrorValueDropped)
		if len(d.Value) != 0 || msg != "transform loop: record too big to transform" || stage != "loop" ||
			!strings.Contains(dropped, "could not be written") {
			t.Errorf("dead letter %q: %d-byte value, error %q, transform %q, dropped %q; want no value, the transform error, the reason it was dropped",
				d.Key, len(d.Value), msg, stage, dropped)
		}
		in := map[string]*kgo.Record{"bigA": bigA, "bigB": bigB}[string(d.Key)]
		if src, _ := Lineage(d); in == nil || src.Offset != in.Offset {
			t.Errorf("dead letter %q names source offset %d", d.Key, src.Offset)
		}
	}
	if len(dead) != 2 || !got["bigA"] || !got["bigB"] {
		t.Errorf("%d dead letters (%v), want one each for bigA and bigB", len(dead), got)
	}
	if d := testutil.ToFloat64(run.pm.DLQ); d != 2 {
		t.Errorf("processor_records_dlq_total = %v, want 2", d)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))

	// A dead letter whose key alone is too large.
	bigKey := &kgo.Record{Key: incompressible(bigSize, 3), Value: []byte("small")}
	e.produceRecords(bigKey)
	err := waitDone(t, run, 30*time.Second, "a dead letter too large even without its value must stop the processor")
	var re *RecordError
	want := record.Source{Topic: e.in, Partition: bigKey.Partition, Offset: bigKey.Offset}
	if !errors.As(err, &re) || re.Source != want || !strings.Contains(err.Error(), "even without its value") ||
		!strings.Contains(err.Error(), "record too big to transform") || !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Run returned %v, want a *RecordError for %+v: its dead letter cannot be written even without its value", err, want)
	}
}

// An output routed to a topic that does not exist aborts the transaction
// once; the cluster confirms the topic missing, and from then on records
// routed there fail at once as "produce" failures (here dead letters
// saying the topic does not exist) while every other record is output
// exactly once.
func TestLoopRoutedToMissingTopic(t *testing.T) {
	e := newMemEnv(t)
	const n, keys = 60, 3
	e.produce(n, keys)
	ghost := func(r *kgo.Record) bool { return loopSeq(string(r.Value))%10 == 4 }
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if ghost(r) {
			r.Topic = "ghost"
		}
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{Lineage: true, OnError: DeadLetter, DLQTopic: e.dlq})
	eventually(t, 45*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	if a := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonProduce))); a < 1 {
		t.Errorf("aborted{reason=produce_error} = %v, want at least 1", a)
	}
	e.checkTopic(e.out, e.read(e.out, true), func(in *kgo.Record) bool { return !ghost(in) })
	dead := e.read(e.dlq, true)
	e.checkTopic(e.dlq, dead, ghost)
	for _, d := range dead {
		msg, _ := header(d, record.HeaderError)
		stage, _ := header(d, record.HeaderErrorTransform)
		if !strings.Contains(msg, `routed to topic "ghost", which does not exist`) || stage != stageProduce {
			t.Errorf("dead letter %q: error %q, transform %q; want the missing topic named, produce", d.Value, msg, stage)
		}
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
}

// A dead-letter topic that does not exist (any more) stops the processor
// at the first dead letter, with an error naming the topic: no record can
// be dead-lettered, and retrying would abort forever.
func TestLoopDeadLetterTopicMissing(t *testing.T) {
	e := newMemEnv(t)
	const n, keys = 30, 3
	e.produce(n, keys)
	poison := e.inputs[n/3]
	chain := poisonChain(t, poison)
	run := e.start("g", "g-a", chain, Options{Lineage: true, OnError: DeadLetter, DLQTopic: "ghost-dlq"})
	err := waitDone(t, run, 45*time.Second, "a missing dead-letter topic must stop the processor")
	var missing *MissingTopicsError
	if !errors.As(err, &missing) || !missing.Deleted || !slices.Equal(missing.Topics, []string{"ghost-dlq"}) {
		t.Fatalf("Run returned %v, want a *MissingTopicsError naming the missing dead-letter topic", err)
	}
	e.checkStoppedAt(run, e.out, poison)
}

// confirmMissing asks the cluster about the topics that produce failures
// blame as unknown, and only those: a topic the cluster does not have is
// confirmed and remembered (so that checkDestinations fails records routed
// there), one it has is not, and failures for other reasons ask nothing.
func TestConfirmMissing(t *testing.T) {
	e := newMemEnv(t)
	s := newMemSession(e.mem, "g", "g-a", e.in, txn.NewMetrics(prometheus.NewRegistry()))
	defer s.Close()
	p, err := New(loopChain(t, passThrough), Options{OutputTopic: e.out, CommitInterval: time.Second, MaxRecordsPerTxn: 10,
		Metrics: NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	p.attach(s, s)
	fail := func(topic string, err error) txn.Failure {
		return txn.Failure{Record: &kgo.Record{Topic: topic}, Err: err}
	}
	ctx := context.Background()
	if got := p.confirmMissing(ctx, []txn.Failure{fail("never", kerr.MessageTooLarge), fail(e.out, kerr.NotLeaderForPartition)}); len(got) != 0 || len(p.book.missing) != 0 {
		t.Errorf("failures that blame no unknown topic confirmed %v (remembered %v), want nothing", got, p.book.missing)
	}
	before := time.Now()
	got := p.confirmMissing(ctx, []txn.Failure{
		fail("never", kerr.UnknownTopicOrPartition),
		fail(e.out, fmt.Errorf("producing: %w", kerr.UnknownTopicOrPartition)),
		fail("never", kerr.UnknownTopicOrPartition),
	})
	if len(got) != 1 || !got["never"] {
		t.Errorf("confirmMissing = %v, want only never confirmed missing", got)
	}
	if at, ok := p.book.missing["never"]; !ok || at.Before(before) || len(p.book.missing) != 1 {
		t.Errorf("remembered as missing: %v, want never, from now", p.book.missing)
	}
	if err := p.checkDestinations([]*kgo.Record{{Topic: "never"}}, false); err == nil {
		t.Error("an output routed to a confirmed-missing topic passes checkDestinations")
	}
}

// Under the skip policy an output the broker rejects for good skips its
// input, found alone once transactions have shrunk: every other input is
// output once, and the skipped one is counted.
func TestLoopOutputTooLargeSkipped(t *testing.T) {
	e := newMemEnv(t)
	tiny := e.createTopic("tiny", 1, map[string]string{"max.message.bytes": strconv.Itoa(tinyLimit)})
	const n, keys = 40, 4
	e.produce(n, keys)
	big := e.inputs[29]
	run := e.startBatched("g", "g-a", loopChain(t, bigOutputs(big)), Options{OutputTopic: tiny, Lineage: true, OnError: Skip})
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	e.checkTopic(tiny, e.read(tiny, true), func(in *kgo.Record) bool { return in != big })
	if s := testutil.ToFloat64(run.pm.Skipped); s != 1 {
		t.Errorf("processor_records_skipped_total = %v, want 1", s)
	}
}
