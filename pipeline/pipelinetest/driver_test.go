package pipelinetest_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/pipeline/pipelinetest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/aggregate"
	"github.com/streamproc/processor/transform/transformtest"
)

// chainOf builds a chain of the one transform fn.
func chainOf(t *testing.T, fn transform.Func) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("fn", transform.Plain("", func() (transform.Transform, error) { return fn, nil }))
	c, err := reg.Build([]transform.Entry{{Name: "fn"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// start is New, failing the test on an error, and closed at its end.
func start(t *testing.T, chain *transform.Chain, opts ...pipelinetest.Option) *pipelinetest.Driver {
	t.Helper()
	d, err := pipelinetest.New(chain, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func values(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// Under the fail policy the loop stops at the failing record: Send
// returns the record's error, that record and the later ones are not
// committed, the earlier ones are, and Close returns the same error.
func TestSendStopsOnFailure(t *testing.T) {
	d := start(t, chainOf(t, func(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if string(r.Value) == "bad" {
			return nil, errors.New("refused")
		}
		return append(out, r), nil
	}))
	res, err := d.Send(&kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("bad")}, &kgo.Record{Value: []byte("c")})
	var recErr *pipeline.RecordError
	if !errors.As(err, &recErr) || recErr.Source.Offset != 1 {
		t.Fatalf("Send returned %v, want the RecordError of offset 1", err)
	}
	if len(res) != 3 || !res[0].Committed || res[1].Committed || res[2].Committed {
		t.Fatalf("committed %v %v %v, want true false false", res[0].Committed, res[1].Committed, res[2].Committed)
	}
	if got := values(d.Read(pipelinetest.DefaultOutput)); len(got) != 1 || got[0] != "a" {
		t.Errorf("output %q, want [a]", got)
	}
	if _, err := d.Send(&kgo.Record{Value: []byte("d")}); !errors.As(err, &recErr) {
		t.Errorf("Send after the stop returned %v, want the RecordError again", err)
	}
	if err := d.Close(); !errors.As(err, &recErr) {
		t.Errorf("Close returned %v, want the RecordError", err)
	}
}

// Under the skip policy a failed record is committed as skipped; a
// record the chain drops is filtered; neither writes anything.
func TestSendSkipsAndFilters(t *testing.T) {
	d := start(t, chainOf(t, func(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		switch string(r.Value) {
		case "bad":
			return nil, errors.New("refused")
		case "drop":
			return out, nil
		}
		return append(out, r), nil
	}), pipelinetest.WithOptions(pipeline.Options{OutputTopic: "out", OnError: pipeline.Skip}))
	res, err := d.Send(&kgo.Record{Value: []byte("bad")}, &kgo.Record{Value: []byte("drop")}, &kgo.Record{Value: []byte("ok")})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Skipped || res[0].Filtered() || res[1].Skipped || !res[1].Filtered() || res[2].Skipped || res[2].Filtered() {
		t.Errorf("skipped %v %v %v, filtered %v %v %v; want skipped only the first, filtered only the second",
			res[0].Skipped, res[1].Skipped, res[2].Skipped, res[0].Filtered(), res[1].Filtered(), res[2].Filtered())
	}
	if got := values(d.Read("out")); len(got) != 1 || got[0] != "ok" {
		t.Errorf("output %q, want [ok]", got)
	}
}

// An aborted transaction is rewound and its input processed again: the
// outputs are written once, and the chain saw the input twice.
func TestSendAbortRewinds(t *testing.T) {
	var runs atomic.Int32
	d := start(t, chainOf(t, func(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		runs.Add(1)
		return append(out, r), nil
	}), pipelinetest.WithOptions(pipeline.Options{OutputTopic: "out", InjectAbort: func(seq uint64) bool { return seq == 1 }}))
	res, err := d.Send(&kgo.Record{Value: []byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the chain ran %d times, want 2 (the aborted transaction and the one after)", n)
	}
	if got := values(res[0].Outputs); len(got) != 1 || got[0] != "a" {
		t.Errorf("result outputs %q, want [a]", got)
	}
	if got := values(d.Read("out")); len(got) != 1 {
		t.Errorf("output %q, want one record", got)
	}
	if s := d.Status(); s.Commits != 1 {
		t.Errorf("status commits %d, want 1", s.Commits)
	}
}

// With WithTopics only the named topics exist: the loop refuses to start
// when a topic it requires is missing, and an output to another topic
// fails the record.
func TestSendTopicsThatExist(t *testing.T) {
	pass := func(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if string(r.Value) == "elsewhere" {
			r.Topic = "nowhere"
		}
		return append(out, r), nil
	}
	d := start(t, chainOf(t, pass), pipelinetest.WithOptions(pipeline.Options{OutputTopic: "out", RequireTopics: []string{"out"}}),
		pipelinetest.WithTopics("in"), pipelinetest.WithInput("in", 1))
	var missing *pipeline.MissingTopicsError
	if _, err := d.Send(&kgo.Record{Value: []byte("a")}); !errors.As(err, &missing) || missing.Topics[0] != "out" {
		t.Fatalf("Send returned %v, want out missing", err)
	}
	d = start(t, chainOf(t, pass), pipelinetest.WithOptions(pipeline.Options{OutputTopic: "out", OnError: pipeline.Skip}),
		pipelinetest.WithTopics("out"))
	res, err := d.Send(&kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("elsewhere")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Outputs) != 1 || len(res[1].Outputs) != 0 || !res[1].Skipped {
		t.Errorf("outputs %d and %d, second skipped %v; want 1, 0 and skipped", len(res[0].Outputs), len(res[1].Outputs), res[1].Skipped)
	}
}

// Records go to the partition they name, at their offset or the
// partition's end, and the outputs' lineage names them; a partition not
// declared is an error.
func TestSendPartitionsAndOffsets(t *testing.T) {
	d := start(t, chainOf(t, func(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, r), nil
	}), pipelinetest.WithInput("in", 2))
	res, err := d.Send(&kgo.Record{Partition: 1, Offset: 7, Value: []byte("a")}, &kgo.Record{Partition: 1, Value: []byte("b")},
		&kgo.Record{Value: []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		p   int32
		off int64
	}{{1, 7}, {1, 8}, {0, 0}} {
		in := res[i].Input
		if in.Topic != "in" || in.Partition != want.p || in.Offset != want.off {
			t.Errorf("input %d at %s/%d@%d, want in/%d@%d", i, in.Topic, in.Partition, in.Offset, want.p, want.off)
		}
		wantSrc := "in/" + strconv.Itoa(int(want.p)) + "/" + strconv.FormatInt(want.off, 10)
		if lineage := header(res[i].Outputs[0], record.HeaderSource); lineage != wantSrc {
			t.Errorf("output %d lineage %q, want %q", i, lineage, wantSrc)
		}
	}
	if _, err := d.Send(&kgo.Record{Partition: 2, Value: []byte("d")}); err == nil {
		t.Error("a record of partition 2 of a topic of 2 was accepted")
	}
	if _, err := d.Send(&kgo.Record{Topic: pipelinetest.DefaultOutput, Value: []byte("e")}); err == nil {
		t.Error("a record of a topic that is not an input was accepted")
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// A window that emits on close closes when an input's stream time passes
// its end plus grace: its record comes with that input, among Closed; a
// record of a closed window is late.
func TestSendClosesWindows(t *testing.T) {
	chain, err := transformtest.Build("aggregate", map[string]string{"WINDOW": "10s", "GRACE": "2s", "EMIT": "close"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chain.Close() })
	d := start(t, chain)
	at := func(ms int64) *kgo.Record {
		return &kgo.Record{Key: []byte("k"), Value: []byte("{}"), Timestamp: time.UnixMilli(ms)}
	}
	res, err := d.Send(at(1000), at(5000), at(11000), at(12000), at(3000))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{0, 0, 0, 1, 0} {
		if len(res[i].Closed) != want || len(res[i].Outputs) != 0 {
			t.Errorf("input %d: %d closed, %d outputs; want %d closed, none", i, len(res[i].Closed), len(res[i].Outputs), want)
		}
	}
	if !res[4].Late || res[3].Late {
		t.Errorf("late %v %v, want only the last input late", res[3].Late, res[4].Late)
	}
	if v := string(res[3].Closed[0].Value); v == "" {
		t.Error("the closed window's record is empty")
	}
}
