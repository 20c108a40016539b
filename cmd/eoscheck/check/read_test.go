package check

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/record"
)

// env is one kfake cluster over real TCP, with helpers that play both the
// upstream producer and the processor.
type env struct {
	t       *testing.T
	c       *kafkatest.Cluster
	brokers []string
	adm     *kadm.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := kafkatest.NewFake(t, kfake.NumBrokers(1))
	return &env{t: t, c: c, brokers: c.Brokers, adm: c.Admin(t)}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) createTopics(partitions int32, topics ...string) {
	e.t.Helper()
	e.c.CreateTopics(e.t, partitions, nil, topics...)
}

// client returns a producer that writes to the partition a record names.
func (e *env) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	return e.c.Client(e.t, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

func (e *env) produce(cl *kgo.Client, recs ...*kgo.Record) {
	e.t.Helper()
	if err := cl.ProduceSync(ctxT(e.t), recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

// txn writes recs in one transaction of cl and commits or aborts it.
func (e *env) txn(cl *kgo.Client, commit bool, recs ...*kgo.Record) {
	e.t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		e.t.Fatal(err)
	}
	e.produce(cl, recs...)
	if err := cl.EndTransaction(ctxT(e.t), kgo.TransactionEndTry(commit)); err != nil {
		e.t.Fatal(err)
	}
}

func inputRec(topic string, p int32, i int) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))}
}

// outputRec is what an identity processor writes for src, with lineage.
func outputRec(topic string, p int32, src Input) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Key: []byte("k" + strconv.FormatInt(src.Offset, 10)), Headers: []kgo.RecordHeader{
		{Key: record.HeaderSourceTopic, Value: []byte(src.Topic)},
		{Key: record.HeaderSourcePartition, Value: []byte(strconv.Itoa(int(src.Partition)))},
		{Key: record.HeaderSourceOffset, Value: []byte(strconv.FormatInt(src.Offset, 10))},
	}}
}

// scenario writes a processed run under topic names prefixed by prefix:
// plain input <prefix>in (2 partitions, 10 records each), transactional
// input <prefix>in-tx (1 partition, 5 records and a commit marker), output
// <prefix>out (2 partitions); an aborted attempt, then a committed one,
// then the group's offsets. mutate may change the committed attempt's
// outputs before they are written.
func (e *env) scenario(prefix string, mutate func([]*kgo.Record) []*kgo.Record) Source {
	e.t.Helper()
	in, inTx, out := prefix+"in", prefix+"in-tx", prefix+"out"
	e.createTopics(2, in, out)
	e.createTopics(1, inTx)

	plain := e.client()
	for p := int32(0); p < 2; p++ {
		for i := range 10 {
			e.produce(plain, inputRec(in, p, i))
		}
	}
	upstream := e.client(kgo.TransactionalID(prefix + "upstream"))
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, inputRec(inTx, 0, i))
	}
	e.txn(upstream, true, recs...) // offsets 0..4, marker at 5

	proc := e.client(kgo.TransactionalID(prefix + "processor"))
	// A first attempt at in/0@0..4 aborts.
	var attempt []*kgo.Record
	for o := range int64(5) {
		attempt = append(attempt, outputRec(out, 0, Input{in, 0, o}))
	}
	e.txn(proc, false, attempt...)
	// The retry commits everything.
	var all []*kgo.Record
	for p := int32(0); p < 2; p++ {
		for o := range int64(10) {
			all = append(all, outputRec(out, p, Input{in, p, o}))
		}
	}
	for o := range int64(5) {
		all = append(all, outputRec(out, 1, Input{inTx, 0, o}))
	}
	if mutate != nil {
		all = mutate(all)
	}
	e.txn(proc, true, all...)

	offs := kadm.Offsets{}
	offs.AddOffset(in, 0, 10, -1)
	offs.AddOffset(in, 1, 10, -1)
	offs.AddOffset(inTx, 0, 5, -1) // caught up: the marker at 5 is never read
	if err := e.adm.CommitAllOffsets(ctxT(e.t), prefix+"group", offs); err != nil {
		e.t.Fatal(err)
	}
	return Source{Brokers: e.brokers, Inputs: []string{in, inTx}, Outputs: []string{out}, Group: prefix + "group"}
}

func (e *env) read(src Source) Run {
	e.t.Helper()
	r, err := NewReader(src)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close()
	if err := r.Ping(ctxT(e.t)); err != nil {
		e.t.Fatal(err)
	}
	run, err := r.Read(ctxT(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

func TestReadCleanRun(t *testing.T) {
	e := newEnv(t)
	src := e.scenario("a-", nil)
	run := e.read(src)
	if got := run.InputEnds[record.TopicPartition{Topic: "a-in-tx", Partition: 0}]; got != 6 {
		t.Errorf("transactional input end = %d, want 6", got)
	}
	rep := Check(run, strict)
	expect(t, rep, nil)
	if rep.Inputs != 25 || rep.OutputsVisible != 25 || rep.OutputsAborted != 5 || rep.OutputsPending != 0 {
		t.Errorf("totals: inputs %d visible %d aborted %d pending %d", rep.Inputs, rep.OutputsVisible, rep.OutputsAborted, rep.OutputsPending)
	}
}

func TestReadDuplicateAndLost(t *testing.T) {
	e := newEnv(t)
	src := e.scenario("b-", func(all []*kgo.Record) []*kgo.Record {
		var out []*kgo.Record
		for _, r := range all {
			src, _ := Lineage(r)
			switch src {
			case Input{"b-in", 1, 3}: // dropped
				continue
			case Input{"b-in", 0, 2}: // written twice
				out = append(out, outputRec("b-out", 0, src))
			}
			out = append(out, r)
		}
		return out
	})
	rep := Check(e.read(src), strict)
	expect(t, rep, map[Anomaly]int{Duplicate: 1, Lost: 1})
}

func TestReadDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.createTopics(2, "d-dlq")
	long := strings.Repeat("x", 1000)
	dl := func(src Input, msg string) *kgo.Record {
		r := outputRec("d-dlq", src.Partition, src)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: record.HeaderError, Value: []byte(msg)})
		return r
	}
	// An attempt that dead-lettered d-in/0@1 aborts: invisible, fine.
	e.txn(e.client(kgo.TransactionalID("d-other")), false, dl(Input{"d-in", 0, 1}, "aborted attempt"))
	// The committed attempt dead-letters d-in/1@3 instead of writing it.
	src := e.scenario("d-", func(all []*kgo.Record) []*kgo.Record {
		var out []*kgo.Record
		for _, r := range all {
			if s, _ := Lineage(r); s == (Input{"d-in", 1, 3}) {
				out = append(out, dl(s, "jq: context canceled "+long))
				continue
			}
			out = append(out, r)
		}
		return out
	})

	// Without the dead-letter topic the input looks lost (or skipped).
	expect(t, Check(e.read(src), strict), map[Anomaly]int{Lost: 1})

	src.DeadLetters = []string{"d-dlq"}
	run := e.read(src)
	if len(run.DeadLetters) != 2 || len(run.Outputs) != 29 {
		t.Fatalf("%d dead letters, %d outputs", len(run.DeadLetters), len(run.Outputs))
	}
	for _, d := range run.DeadLetters {
		if len(d.Error) > MaxErrorLen+3 {
			t.Errorf("error header kept whole: %d bytes", len(d.Error))
		}
	}
	rep := Check(run, strict)
	expect(t, rep, map[Anomaly]int{DeadLetter: 1})
	if ex := rep.Examples[DeadLetter]; len(ex) != 1 || !strings.HasPrefix(ex[0], `d-dlq/1@`) ||
		!strings.Contains(ex[0], ` is a dead letter of d-in/1@3, processor.error "jq: context canceled xxx`) {
		t.Errorf("example: %q", ex)
	}
}

func TestReadLiveHangingAndStuck(t *testing.T) {
	e := newEnv(t)
	src := e.scenario("c-", nil)

	// New input the group never gets to: lag on c-in/1.
	plain := e.client()
	for i := range 3 {
		e.produce(plain, inputRec("c-in", 1, 10+i))
	}
	// Two transactions interleave on c-out/1: one attempt writes and later
	// aborts, another opens in between and never ends. The aborted record
	// lies below the last stable offset and its marker above it.
	p1 := e.client(kgo.TransactionalID("c-p1"))
	p2 := e.client(kgo.TransactionalID("c-p2"))
	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	e.produce(p2, outputRec("c-out", 1, Input{"c-in", 1, 10}))
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	e.produce(p1, outputRec("c-out", 1, Input{"c-in", 1, 11}))
	if err := p2.EndTransaction(ctxT(t), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	r, err := NewReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	samples, err := r.Watch(ctxT(t), 2*time.Second, 250*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) < 5 {
		t.Fatalf("%d samples", len(samples))
	}
	run, err := r.Read(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	run.Samples = samples
	opts := strict
	opts.TransactionTimeout, opts.StuckAfter = time.Second, time.Second
	rep := Check(run, opts)
	expect(t, rep, map[Anomaly]int{Hanging: 1, Stuck: 1, Uncommitted: 3})
	if rep.OutputsPending != 1 || rep.OutputsAborted != 6 {
		t.Errorf("pending %d aborted %d, want 1 and 6", rep.OutputsPending, rep.OutputsAborted)
	}
	t.Logf("\n%s", rep.Table())

	// Without the samples, and without expecting everything done, the
	// same state is clean: the open transaction is pending, not lost.
	run.Samples = nil
	expect(t, Check(run, Options{OneToOne: true}), nil)
}

func TestPingMissingTopic(t *testing.T) {
	e := newEnv(t)
	e.createTopics(1, "here")
	r, err := NewReader(Source{Brokers: e.brokers, Inputs: []string{"here"}, Outputs: []string{"missing"}, Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Ping(ctxT(t)); err == nil || err.Error() != `topic "missing" does not exist` {
		t.Errorf("Ping = %v", err)
	}
}

func TestLineage(t *testing.T) {
	good := outputRec("o", 0, Input{"in", 3, 42})
	if got, ok := Lineage(good); !ok || got != (Input{"in", 3, 42}) {
		t.Errorf("Lineage = %v %v", got, ok)
	}
	for name, hs := range map[string][]kgo.RecordHeader{
		"none":          nil,
		"no offset":     good.Headers[:2],
		"bad partition": {good.Headers[0], {Key: record.HeaderSourcePartition, Value: []byte("x")}, good.Headers[2]},
		"negative":      {good.Headers[0], good.Headers[1], {Key: record.HeaderSourceOffset, Value: []byte("-1")}},
	} {
		if got, ok := Lineage(&kgo.Record{Headers: hs}); ok || got != (Input{}) {
			t.Errorf("%s: Lineage = %v %v", name, got, ok)
		}
	}
}

// TestReadMarks reads the drill's marks from the input keys with
// Source.Poison, and none without: ReadInputs for a run into PostgreSQL,
// and Read, whose run then judges a notjson input's dead letter as what
// its class must become.
func TestReadMarks(t *testing.T) {
	e := newEnv(t)
	e.createTopics(1, "m-in", "m-out", "m-dlq")
	big := "9" + strings.Repeat("1", 139_999)
	e.produce(e.client(),
		&kgo.Record{Topic: "m-in", Key: []byte("k0"), Value: []byte(`{"key":"k0","seq":0}`)},
		&kgo.Record{Topic: "m-in", Key: []byte(PoisonKey(NotJSON, 1)), Value: []byte("not json 1")},
		&kgo.Record{Topic: "m-in", Key: []byte(PoisonKey(JSONBRefused, 2)), Value: []byte(`{"key":"poison-jsonb-2","seq":2,"poison":` + big + `}`)},
	)
	out := e.client(kgo.TransactionalID("m-proc"))
	dl := outputRec("m-dlq", 0, Input{"m-in", 0, 1})
	dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: record.HeaderError, Value: []byte("transform jq: the value is not JSON")})
	e.txn(out, true, outputRec("m-out", 0, Input{"m-in", 0, 0}), dl, outputRec("m-out", 0, Input{"m-in", 0, 2}))
	if err := e.adm.CommitAllOffsets(ctxT(t), "m-group", kadm.OffsetsFromRecords(kgo.Record{Topic: "m-in", Partition: 0, Offset: 2})); err != nil {
		t.Fatal(err)
	}
	src := Source{Brokers: e.brokers, Inputs: []string{"m-in"}, Outputs: []string{"m-out"}, DeadLetters: []string{"m-dlq"}, Group: "m-group"}

	r, err := NewReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, marks, err := r.ReadInputs(ctxT(t)); err != nil || marks != nil {
		t.Errorf("without Poison: marks %v, err %v", marks, err)
	}
	src.Poison = true
	r2, err := NewReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	inputs, _, marks, err := r2.ReadInputs(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) != 3 || len(marks) != 2 || marks[Input{"m-in", 0, 1}].Class != NotJSON ||
		marks[Input{"m-in", 0, 2}].Class != JSONBRefused || string(marks[Input{"m-in", 0, 2}].Payload) != big {
		t.Errorf("inputs %v, marks of %d inputs: %v", inputs, len(marks), func() (cs []Class) {
			for _, m := range marks {
				cs = append(cs, m.Class)
			}
			return
		}())
	}
	run, err := r2.Read(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Marks) != 2 {
		t.Errorf("Read: marks of %d inputs, want 2", len(run.Marks))
	}
	rep := Check(run, Options{OneToOne: true, ExpectAll: true})
	expect(t, rep, nil)
	if ct := rep.Classes[NotJSON]; ct == nil || *ct != (ClassTotals{Inputs: 1, DeadLetters: 1}) {
		t.Errorf("notjson totals %+v", ct)
	}
}
