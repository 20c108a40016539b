package faults

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// processed records, per input partition, the highest offset a transform
// has passed on.
type processed struct {
	mu  sync.Mutex
	max map[int32]int64
}

func (p *processed) note(src record.Source) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o, ok := p.max[src.Partition]; !ok || src.Offset > o {
		p.max[src.Partition] = src.Offset
	}
}

// ctxChain is a chain whose one transform takes about d per record and,
// like gojq or a lookup client, gives up with the context's error as soon
// as its context ends. Records it passes on are noted in seen, if given.
func ctxChain(t testing.TB, d time.Duration, seen ...*processed) *transform.Chain {
	t.Helper()
	return itest.FuncChain(t, "wait", transform.Func(func(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-tm.C:
		}
		for _, s := range seen {
			s.note(src)
		}
		return append(out, r), nil
	}))
}

// A stop (SIGTERM in a rolling deploy, a pod eviction) is never a record
// failure. Instances are stopped mid-transaction, while records they have
// polled are still going through a transform that gives up when its context
// ends; under dlq and under skip, no record may be dead-lettered or skipped,
// every stop must commit its open transaction at once (no abort; the
// group's offsets cover every record the transform passed on, and equal
// what the instances counted as consumed), and the output stays exactly
// once.
func TestStopNeverFailsRecords(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		for _, policy := range []pipeline.OnError{pipeline.DeadLetter, pipeline.Skip} {
			t.Run(string(policy), func(t *testing.T) {
				t.Parallel() // on topics and a group of its own; the input is fed at a pace
				in := itest.Input{Topic: itest.Unique("stop-in"), N: 12000, Keys: 40}
				out, dlq, group := itest.Unique("stop-out"), itest.Unique("stop-dlq"), itest.Unique("stop-group")
				tg.NewTopics(t, 3, in.Topic, out, dlq)
				// Input arrives while the instances run, about 1,000 records
				// a second for 12 s: polls are small, a transaction spans several of
				// them, and the transform is busy most of the time, so a
				// stop lands with a transaction open and records in hand.
				fed := make(chan struct{})
				go func() {
					defer close(fed)
					for from := 0; from < in.N; from += 100 {
						tg.Produce(t, in, from, from+100)
						time.Sleep(100 * time.Millisecond)
					}
				}()
				opts := itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
					OnError: policy, DLQTopic: dlq, MaxRecords: 100000, CommitInterval: 400 * time.Millisecond}
				var stopped []*itest.Instance
				for round := 0; round < 3 && !isClosed(fed); round++ {
					seen := &processed{max: map[int32]int64{}}
					opts.Chain = ctxChain(t, 400*time.Microsecond, seen)
					a := tg.Start(t, opts)
					itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return a.Pipeline.Stats().Commits > 0 || isClosed(fed) })
					time.Sleep(150 * time.Millisecond) // mid-transaction: polled records are in the transform
					began := time.Now()
					a.Stop(t)
					if took := time.Since(began); took > 10*time.Second {
						t.Errorf("round %d: stopping took %s", round, took.Round(time.Millisecond))
					}
					var committed int64
					offsets := tg.CommittedOffsets(t, group, in.Topic)
					for _, o := range offsets {
						committed += o
					}
					for p, o := range seen.max {
						if offsets[p] <= o {
							t.Errorf("round %d: partition %d: the transform passed on offset %d, but the group committed only up to %d: the stop did not commit its open transaction", round, p, o, offsets[p])
						}
					}
					if consumed := itest.SumConsumed(append(stopped, a)...); uint64(committed) != consumed {
						t.Errorf("round %d: the group committed %d input records, the instances consumed %d: the stop did not commit its open transaction", round, committed, consumed)
					}
					stopped = append(stopped, a)
				}
				select {
				case <-fed:
				case <-time.After(60 * time.Second):
					t.Fatal("writing the input took more than 60s")
				}
				opts.Chain = ctxChain(t, 0)
				last := tg.Start(t, opts)
				tg.WaitCaughtUp(t, group, in.Topic, last)
				last.Stop(t)
				for i, s := range append(stopped, last) {
					if n := testutil.ToFloat64(s.PipelineMetrics.DLQ) + testutil.ToFloat64(s.PipelineMetrics.Skipped); n != 0 {
						t.Errorf("instance %d dead-lettered or skipped %v good records", i, n)
					}
					if n := s.Pipeline.Stats().Aborts; n != 0 {
						t.Errorf("instance %d aborted %d transactions; a stop must commit", i, n)
					}
				}
				if dl := tg.ReadAll(t, dlq, false); len(dl) != 0 {
					t.Errorf("%d dead letters written (even if aborted); first: %s", len(dl), itest.HeaderValue(dl[0], record.HeaderError))
				}
				itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
				if !t.Failed() {
					t.Logf("%d stops, none failed a record", len(stopped))
				}
			})
		}
	})
}

// Error text that quotes a record is clipped wherever the processor
// repeats it: the exit error, /healthz (which shows the pipeline's fatal
// error) and the dead-letter header.
func TestRecordErrorsAreClipped(t *testing.T) {
	t.Parallel()
	tg := itest.NewFake(t)
	in := itest.Input{Topic: itest.Unique("clip-in"), N: 5, Keys: 1}
	out, dlq, group := itest.Unique("clip-out"), itest.Unique("clip-dlq"), itest.Unique("clip-group")
	tg.NewTopics(t, 1, in.Topic, out, dlq)
	tg.Produce(t, in, 0, in.N)
	huge := strings.Repeat("x", 1<<20)
	reg := &transform.Registry{}
	reg.Register("quote", transform.Plain("", func() (transform.Transform, error) {
		return transform.Func(func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			return out, &quotingError{value: huge}
		}), nil
	}))
	build := func() *transform.Chain {
		c, err := reg.Build([]transform.Entry{{Name: "quote"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	d := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-d", Topics: []string{in.Topic}, Out: out, Chain: build(),
		OnError: pipeline.DeadLetter, DLQTopic: dlq})
	tg.WaitCaughtUp(t, group, in.Topic, d)
	d.Stop(t)
	letters := tg.ReadAll(t, dlq, true)
	if len(letters) != in.N {
		t.Fatalf("%d dead letters, want %d", len(letters), in.N)
	}
	if h := itest.HeaderValue(letters[0], record.HeaderError); len(h) > 400 || !strings.Contains(h, "bytes)") {
		t.Errorf("dead-letter error header is %d bytes: %.80q...", len(h), h)
	}

	group2 := itest.Unique("clip-fail")
	f := tg.Start(t, itest.InstanceOpts{Group: group2, TxnID: group2 + "-f", Topics: []string{in.Topic}, Out: out, Chain: build()})
	select {
	case <-f.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("the failing instance did not stop within 30s")
	}
	f.Stopped = true
	if f.Err == nil || len(f.Err.Error()) > 600 {
		t.Fatalf("Run returned an error of %d bytes, want a clipped one", len(errString(f.Err)))
	}
	var qe *quotingError
	if !errors.As(f.Err, &qe) {
		t.Errorf("the clipped error no longer wraps the transform's: %v", f.Err)
	}
	if h := f.Pipeline.Healthy(); h == nil || len(h.Error()) > 600 {
		t.Errorf("/healthz would show %d bytes", len(errString(h)))
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// quotingError quotes a whole value, as jq's errors do.
type quotingError struct{ value string }

func (e *quotingError) Error() string { return "cannot process " + e.value }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
