package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/identity"
)

// Sizes of records near Kafka's default limit (max.message.bytes and
// message.max.bytes, 1,048,588 bytes): above franz-go's default producer
// limit of 1,000,012 bytes, within what the broker accepts.
var nearLimitSizes = []int{1_000_000, 1_040_000, 1_048_000}

// largeRecords are records of the given value sizes, incompressible (the
// broker measures the compressed batch), keyed "big<i>".
func largeRecords(topic string, sizes ...int) []*kgo.Record {
	recs := make([]*kgo.Record, len(sizes))
	for i, n := range sizes {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte("big" + string(rune('a'+i))), Value: itest.Incompressible(n, uint64(n))}
	}
	return recs
}

// Records of 1,000,000, 1,040,000 and 1,048,000 bytes, which the broker
// takes with its default limits, pass through identity exactly once, with
// their lineage headers, and nothing is dead-lettered.
func TestRecordsNearSizeLimit(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, dlq, group := itest.Unique("near-in"), itest.Unique("near-out"), itest.Unique("near-dlq"), itest.Unique("near-group")
		tg.NewTopics(t, 1, in, out, dlq)
		sent := tg.ProduceLarge(t, largeRecords(in, nearLimitSizes...)...)

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, Out: out,
			OnError: pipeline.DeadLetter, DLQTopic: dlq})
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in, a)
		a.Stop(t)

		got := map[string]int{}
		for _, r := range tg.ReadAll(t, out, true) {
			got[string(r.Key)]++
			for _, s := range sent {
				if string(s.Key) == string(r.Key) && string(s.Value) != string(r.Value) {
					t.Errorf("output %s: value of %d bytes differs from the input's %d", r.Key, len(r.Value), len(s.Value))
				}
			}
			if _, ok := itest.SourceOf(r); !ok {
				t.Errorf("output %s lacks lineage headers: %v", r.Key, headerKeys(r))
			}
		}
		for _, s := range sent {
			if got[string(s.Key)] != 1 {
				t.Errorf("input of %d bytes is in the output %d times, want once", len(s.Value), got[string(s.Key)])
			}
		}
		for _, r := range tg.ReadAll(t, dlq, true) {
			t.Errorf("dead letter of %d bytes: %s", len(r.Value), itest.HeaderValue(r, record.HeaderError))
		}
	})
}

// growChain is identity followed by "grow", which appends 64 KiB to every
// value larger than 1000 bytes: the outputs of large inputs are then too
// large for a topic with Kafka's default limit.
func growChain(t testing.TB) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("identity", transform.Plain("", func() (transform.Transform, error) { return identity.Transform{}, nil }))
	reg.Register("grow", transform.Plain("", func() (transform.Transform, error) {
		return transform.Func(func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			if len(r.Value) > 1000 {
				r.Value = append(append([]byte(nil), r.Value...), make([]byte, 64<<10)...)
			}
			return append(out, r), nil
		}), nil
	}))
	c, err := reg.Build([]transform.Entry{{Name: "identity"}, {Name: "grow"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An output over its topic's limit (a large input grown by the chain) goes
// to the dead-letter topic, and its dead letter carries the input's value
// intact: the dead letter (the input plus error and lineage headers) fits
// the dead-letter topic's default limit, with the error header clipped when
// it would not fit otherwise (the 1,048,300-byte input, whose compact lineage header alone leaves it too little room). The small records
// around them are output exactly once.
func TestTooLargeOutputDeadLetterKeepsValue(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("grow-in"), N: 200, Keys: 4}
		out, dlq, group := itest.Unique("grow-out"), itest.Unique("grow-dlq"), itest.Unique("grow-group")
		tg.NewTopics(t, 1, in.Topic, out, dlq)
		tg.Produce(t, in, 0, in.N/2)
		bad := tg.ProduceLarge(t, largeRecords(in.Topic, 1_000_000, 1_048_000, 1_048_300)...)
		tg.Produce(t, in, in.N/2, in.N)

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
			Chain: growChain(t), OnError: pipeline.DeadLetter, DLQTopic: dlq})
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in.Topic, a)
		a.Stop(t)

		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != len(bad) {
			t.Errorf("%d dead letters, want %d", len(dead), len(bad))
		}
		for _, r := range dead {
			var orig *kgo.Record
			for _, b := range bad {
				if string(b.Key) == string(r.Key) {
					orig = b
				}
			}
			if orig == nil {
				t.Errorf("dead letter with key %q, which is not a large input", r.Key)
				continue
			}
			if string(r.Value) != string(orig.Value) {
				t.Errorf("dead letter of the %d-byte input: value of %d bytes, want the input's value intact (%s=%q)",
					len(orig.Value), len(r.Value), record.HeaderErrorValueDropped, itest.HeaderValue(r, record.HeaderErrorValueDropped))
			}
			msg := itest.HeaderValue(r, record.HeaderError)
			if !strings.Contains(msg, "output to "+out) || itest.HeaderValue(r, record.HeaderErrorTransform) != "produce" {
				t.Errorf("dead letter of the %d-byte input: %s=%q %s=%q, want the produce failure to %s", len(orig.Value),
					record.HeaderError, msg, record.HeaderErrorTransform, itest.HeaderValue(r, record.HeaderErrorTransform), out)
			}
			if len(orig.Value) == 1_048_300 && !strings.HasSuffix(msg, " bytes)") {
				t.Errorf("dead letter of the %d-byte input: %s=%q, want it clipped to fit", len(orig.Value), record.HeaderError, msg)
			}
		}
	})
}
