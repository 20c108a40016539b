package replay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/replay"
)

var t0 = time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)

// deadLetter is a dead letter at partition p, offset o of the dead-letter
// topic, of input orders/1/42, failed by jq with err.
func deadLetter(p int32, o int64, err string) *kgo.Record {
	hs := append([]kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}},
		kgo.RecordHeader{Key: record.HeaderError, Value: []byte(err)},
		kgo.RecordHeader{Key: record.HeaderErrorTransform, Value: []byte("jq")},
		kgo.RecordHeader{Key: record.HeaderErrorAttempts, Value: []byte("1")},
		kgo.RecordHeader{Key: record.HeaderErrorReplays, Value: []byte("2")})
	hs = append(hs, record.LineageHeaders(record.Source{Topic: "orders", Partition: 1, Offset: 42})...)
	return &kgo.Record{Partition: p, Offset: o, Timestamp: t0, Key: []byte("k"), Value: []byte(`{"a":1}`), Headers: hs}
}

// TestFilter: each bound selects what it says, and nothing else.
func TestFilter(t *testing.T) {
	r := deadLetter(1, 10, "jq: cannot iterate over null")
	for _, tc := range []struct {
		name string
		f    func(*replay.Filter)
		want bool
	}{
		{"all", func(*replay.Filter) {}, true},
		{"partition", func(f *replay.Filter) { f.Partition = 1 }, true},
		{"other partition", func(f *replay.Filter) { f.Partition = 0 }, false},
		{"from at", func(f *replay.Filter) { f.From = 10 }, true},
		{"from after", func(f *replay.Filter) { f.From = 11 }, false},
		{"to after", func(f *replay.Filter) { f.To = 11 }, true},
		{"to at (excluded)", func(f *replay.Filter) { f.To = 10 }, false},
		{"since at", func(f *replay.Filter) { f.Since = t0 }, true},
		{"since after", func(f *replay.Filter) { f.Since = t0.Add(time.Millisecond) }, false},
		{"until after", func(f *replay.Filter) { f.Until = t0.Add(time.Millisecond) }, true},
		{"until at (excluded)", func(f *replay.Filter) { f.Until = t0 }, false},
		{"error", func(f *replay.Filter) { f.Error = "cannot iterate" }, true},
		{"other error", func(f *replay.Filter) { f.Error = "timeout" }, false},
		{"header", func(f *replay.Filter) { f.Header, f.HeaderValue = record.HeaderErrorTransform, "jq" }, true},
		{"header other value", func(f *replay.Filter) { f.Header, f.HeaderValue = record.HeaderErrorTransform, "wasm" }, false},
		{"header absent", func(f *replay.Filter) { f.Header, f.HeaderValue = "nope", "" }, false},
	} {
		f := replay.All()
		tc.f(&f)
		if got := f.Match(r); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRestore: a selected dead letter leaves the stage as the record it
// was made from (its key, value and own headers, no processor.error.* or
// lineage header); one not selected, one without lineage or error and
// one whose value was dropped leave nothing.
func TestRestore(t *testing.T) {
	s := &replay.Restore{Filter: replay.All()}
	out, err := s.Process(context.Background(), record.Source{}, deadLetter(0, 1, "boom"), nil)
	if err != nil || len(out) != 1 {
		t.Fatalf("Process = %v, %v", out, err)
	}
	r := out[0]
	if len(r.Headers) != 1 || r.Headers[0].Key != "trace" || string(r.Value) != `{"a":1}` || string(r.Key) != "k" {
		t.Errorf("restored %q %q %v, want key k, the value and the trace header alone", r.Key, r.Value, r.Headers)
	}
	dropped := deadLetter(0, 1, "boom")
	dropped.Headers = append(dropped.Headers, kgo.RecordHeader{Key: record.HeaderErrorValueDropped, Value: []byte("too large")})
	other := replay.All()
	other.Partition = 5
	for _, tc := range []struct {
		name string
		f    replay.Filter
		r    *kgo.Record
	}{
		{"not selected", other, deadLetter(0, 1, "boom")},
		{"no error", replay.All(), &kgo.Record{Headers: record.LineageHeaders(record.Source{Topic: "orders", Offset: 1})}},
		{"no lineage", replay.All(), &kgo.Record{Headers: []kgo.RecordHeader{{Key: record.HeaderError, Value: []byte("x")}}}},
		{"value dropped", replay.All(), dropped},
	} {
		s := &replay.Restore{Filter: tc.f}
		if out, err := s.Process(context.Background(), record.Source{}, tc.r, nil); err != nil || len(out) != 0 {
			t.Errorf("%s: Process = %v, %v; want nothing", tc.name, out, err)
		}
	}
}

// TestBounds: the stops are the last stable offsets, From the group's
// committed offsets (else the log start), and Reached says whether the
// group has committed the stops.
func TestBounds(t *testing.T) {
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("replay-bounds"), kafkatest.Unique("replay-bounds-group")
		c.CreateTopics(t, 2, nil, topic)
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte("v")})
		}
		c.ProduceSync(t, recs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		adm := c.Admin(t)
		os := make(kadm.Offsets)
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, group, os); err != nil {
			t.Fatal(err)
		}
		var mt *replay.MissingTopicError
		if _, err := replay.Capture(ctx, adm, group, topic+"-none"); !errors.As(err, &mt) {
			t.Errorf("Capture of a missing topic: %v, want a *MissingTopicError", err)
		}
		b, err := replay.Capture(ctx, adm, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		if b.Stop[0] != 5 || b.Stop[1] != 5 || b.From[0] != 5 || b.From[1] != 0 || b.Left() != 5 {
			t.Fatalf("bounds %+v, left %d: want stops 5 and 5, from 5 and 0, 5 left", b, b.Left())
		}
		if ok, err := b.Reached(ctx, adm, group); ok || err != nil {
			t.Fatalf("Reached before partition 1 is read = %v, %v", ok, err)
		}
		os.Add(kadm.Offset{Topic: topic, Partition: 1, At: 5, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, group, os); err != nil {
			t.Fatal(err)
		}
		if ok, err := b.Reached(ctx, adm, group); !ok || err != nil {
			t.Fatalf("Reached once both are read = %v, %v", ok, err)
		}
	})
}
