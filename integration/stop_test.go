package integration

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

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
	reg := &transform.Registry{}
	reg.Register("wait", transform.Plain("", func() (transform.Transform, error) {
		return transform.Func(func(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
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
		}), nil
	}))
	c, err := reg.Build([]transform.Entry{{Name: "wait"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
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
	forEachTarget(t, func(t *testing.T, tg *target) {
		for _, policy := range []pipeline.OnError{pipeline.DeadLetter, pipeline.Skip} {
			t.Run(string(policy), func(t *testing.T) {
				t.Parallel() // on topics and a group of its own; the input is fed at a pace
				in := input{topic: unique("stop-in"), n: 12000, keys: 40}
				out, dlq, group := unique("stop-out"), unique("stop-dlq"), unique("stop-group")
				tg.createTopics(t, 3, in.topic, out, dlq)
				// Input arrives while the instances run, about 1,000 records
				// a second for 12 s: polls are small, a transaction spans several of
				// them, and the transform is busy most of the time, so a
				// stop lands with a transaction open and records in hand.
				fed := make(chan struct{})
				go func() {
					defer close(fed)
					for from := 0; from < in.n; from += 100 {
						tg.produce(t, in, from, from+100)
						time.Sleep(100 * time.Millisecond)
					}
				}()
				opts := instanceOpts{group: group, txnID: group + "-a", topics: []string{in.topic}, out: out,
					onError: policy, dlqTopic: dlq, maxRecords: 100000, commitInterval: 400 * time.Millisecond}
				var stopped []*instance
				for round := 0; round < 3 && !isClosed(fed); round++ {
					seen := &processed{max: map[int32]int64{}}
					opts.chain = ctxChain(t, 400*time.Microsecond, seen)
					a := tg.start(t, opts)
					waitFor(t, 60*time.Second, "a first commit", func() bool { return a.p.Stats().Commits > 0 || isClosed(fed) })
					time.Sleep(150 * time.Millisecond) // mid-transaction: polled records are in the transform
					began := time.Now()
					a.stop(t)
					if took := time.Since(began); took > 10*time.Second {
						t.Errorf("round %d: stopping took %s", round, took.Round(time.Millisecond))
					}
					var committed int64
					offsets := tg.committedOffsets(t, group, in.topic)
					for _, o := range offsets {
						committed += o
					}
					for p, o := range seen.max {
						if offsets[p] <= o {
							t.Errorf("round %d: partition %d: the transform passed on offset %d, but the group committed only up to %d: the stop did not commit its open transaction", round, p, o, offsets[p])
						}
					}
					if consumed := sumConsumed(append(stopped, a)...); uint64(committed) != consumed {
						t.Errorf("round %d: the group committed %d input records, the instances consumed %d: the stop did not commit its open transaction", round, committed, consumed)
					}
					stopped = append(stopped, a)
				}
				select {
				case <-fed:
				case <-time.After(60 * time.Second):
					t.Fatal("writing the input took more than 60s")
				}
				opts.chain = ctxChain(t, 0)
				last := tg.start(t, opts)
				tg.waitCaughtUp(t, group, in.topic, last)
				last.stop(t)
				for i, s := range append(stopped, last) {
					if n := testutil.ToFloat64(s.pm.DLQ) + testutil.ToFloat64(s.pm.Skipped); n != 0 {
						t.Errorf("instance %d dead-lettered or skipped %v good records", i, n)
					}
					if n := s.p.Stats().Aborts; n != 0 {
						t.Errorf("instance %d aborted %d transactions; a stop must commit", i, n)
					}
				}
				if dl := tg.readAll(t, dlq, false); len(dl) != 0 {
					t.Errorf("%d dead letters written (even if aborted); first: %s", len(dl), headerValue(dl[0], record.HeaderError))
				}
				checkExactlyOnce(t, in, tg.readAll(t, out, true))
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
	tg := newFake(t)
	in := input{topic: unique("clip-in"), n: 5, keys: 1}
	out, dlq, group := unique("clip-out"), unique("clip-dlq"), unique("clip-group")
	tg.createTopics(t, 1, in.topic, out, dlq)
	tg.produce(t, in, 0, in.n)
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
	d := tg.start(t, instanceOpts{group: group, txnID: group + "-d", topics: []string{in.topic}, out: out, chain: build(),
		onError: pipeline.DeadLetter, dlqTopic: dlq})
	tg.waitCaughtUp(t, group, in.topic, d)
	d.stop(t)
	letters := tg.readAll(t, dlq, true)
	if len(letters) != in.n {
		t.Fatalf("%d dead letters, want %d", len(letters), in.n)
	}
	if h := headerValue(letters[0], record.HeaderError); len(h) > 400 || !strings.Contains(h, "bytes)") {
		t.Errorf("dead-letter error header is %d bytes: %.80q...", len(h), h)
	}

	group2 := unique("clip-fail")
	f := tg.start(t, instanceOpts{group: group2, txnID: group2 + "-f", topics: []string{in.topic}, out: out, chain: build()})
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the failing instance did not stop within 30s")
	}
	f.stopped = true
	if f.err == nil || len(f.err.Error()) > 600 {
		t.Fatalf("Run returned an error of %d bytes, want a clipped one", len(errString(f.err)))
	}
	var qe *quotingError
	if !errors.As(f.err, &qe) {
		t.Errorf("the clipped error no longer wraps the transform's: %v", f.err)
	}
	if h := f.p.Healthy(); h == nil || len(h.Error()) > 600 {
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
