package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// poisonInput writes n JSON records, with poison among them: malformed JSON
// every 97th, a value that makes the transform panic every 101st, one whose
// output is too large for the broker every 103rd, and one that fails twice
// with a retriable error before it passes every 89th.
func poisonValue(i int) (value string, kind string) {
	switch {
	case i%97 == 13:
		return `{"seq":` + strconv.Itoa(i), "malformed"
	case i%101 == 17:
		return `{"seq":` + strconv.Itoa(i) + `,"panic":true}`, "panic"
	case i%103 == 19:
		return `{"seq":` + strconv.Itoa(i) + `,"big":true}`, "big"
	case i%89 == 23:
		return `{"seq":` + strconv.Itoa(i) + `,"flaky":true}`, "flaky"
	}
	return `{"seq":` + strconv.Itoa(i) + `}`, "good"
}

// jsonChain is a chain with one transform, "parse", that parses the value as
// JSON (malformed JSON is a permanent error), panics on "panic", makes a
// 2 MiB output on "big", and fails "flaky" records twice, retriably.
func jsonChain(t testing.TB) *transform.Chain {
	t.Helper()
	var mu sync.Mutex
	flakes := map[int64]int{}
	return itest.FuncChain(t, "parse", transform.Func(func(_ context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		var v struct {
			Seq   int  `json:"seq"`
			Panic bool `json:"panic"`
			Big   bool `json:"big"`
			Flaky bool `json:"flaky"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return out, fmt.Errorf("malformed JSON: %w", err)
		}
		switch {
		case v.Panic:
			panic("poison record")
		case v.Big:
			r.Value = make([]byte, 2<<20)
		case v.Flaky:
			mu.Lock()
			flakes[src.Offset]++
			n := flakes[src.Offset]
			mu.Unlock()
			if n%3 != 0 {
				return out, transform.Retriable(errors.New("lookup timed out"))
			}
		}
		return append(out, r), nil
	}))
}

// Poison records under each error policy, on a real broker: with dlq the
// outputs plus the dead letters are the inputs, exactly once; with skip the
// outputs are the good inputs; with fail the processor stops at the first
// poison record and commits nothing from it on.
func TestErrorPolicies(t *testing.T) {
	t.Parallel()
	const n = 3000
	for _, policy := range []pipeline.OnError{pipeline.DeadLetter, pipeline.Skip, pipeline.Fail} {
		t.Run(string(policy), func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				in, out, dlq, group := itest.Unique("poison-in"), itest.Unique("poison-out"), itest.Unique("poison-dlq"), itest.Unique("poison-group")
				partitions := int32(3)
				if policy == pipeline.Fail {
					partitions = 1 // one order, so a restart meets the same first poison record
				}
				tg.NewTopics(t, partitions, in, out, dlq)
				cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.DefaultProduceTopic(in))
				if err != nil {
					t.Fatal(err)
				}
				kinds := map[string]int{}
				var recs []*kgo.Record
				for i := range n {
					v, kind := poisonValue(i)
					kinds[kind]++
					recs = append(recs, &kgo.Record{Key: []byte("k" + strconv.Itoa(i%30)), Value: []byte(v),
						Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte(strconv.Itoa(i))}}})
				}
				pctx, cancel := context.WithTimeout(context.Background(), itest.ProduceTimeout)
				err = cl.ProduceSync(pctx, recs...).FirstErr()
				cancel()
				cl.Close()
				if err != nil {
					t.Fatalf("producing the %d input records to %s (deadline %s): %v", n, in, itest.ProduceTimeout, err)
				}

				o := itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, Out: out, Chain: jsonChain(t), MaxRecords: 400,
					OnError: policy, DLQTopic: dlq}
				a := tg.Start(t, o)
				if policy == pipeline.Fail {
					select {
					case <-a.Done:
					case <-time.After(60 * time.Second):
						t.Fatal("the fail policy did not stop the instance")
					}
					a.Stopped = true
					var re *pipeline.RecordError
					if !errors.As(a.Err, &re) {
						t.Fatalf("stopped with %v, want a RecordError", a.Err)
					}
					t.Logf("stopped at %s/%d/%d: %v", re.Source.Topic, re.Source.Partition, re.Source.Offset, re.Err)
					committed := tg.CommittedOffsets(t, group, in)
					if c, ok := committed[re.Source.Partition]; ok && c > re.Source.Offset {
						t.Errorf("partition %d committed to %d, past the failed record at %d", re.Source.Partition, c, re.Source.Offset)
					}
					// A restart meets the same record again.
					b := tg.Start(t, o)
					select {
					case <-b.Done:
					case <-time.After(60 * time.Second):
						t.Fatal("after a restart, the fail policy did not stop the instance within 60s")
					}
					b.Stopped = true
					var again *pipeline.RecordError
					if !errors.As(b.Err, &again) || again.Source != re.Source {
						t.Errorf("after a restart: %v, want the same record to fail again", b.Err)
					}
					return
				}
				tg.WaitCaughtUp(t, group, in, a)
				a.Stop(t)

				seen := map[string]int{}
				outs := tg.ReadAll(t, out, true)
				for _, r := range outs {
					src, ok := itest.SourceOf(r)
					if !ok {
						t.Fatalf("output without lineage headers: %v", r.Headers)
					}
					seen[src]++
					if itest.HeaderValue(r, "trace") == "" {
						t.Errorf("output %s lost its headers", src)
					}
				}
				dead := tg.ReadAll(t, dlq, true)
				for _, r := range dead {
					src, ok := itest.SourceOf(r)
					if !ok {
						t.Fatalf("dead letter without lineage headers: %v", r.Headers)
					}
					seen[src]++
					if itest.HeaderValue(r, record.HeaderError) == "" || itest.HeaderValue(r, record.HeaderErrorAttempts) == "" {
						t.Errorf("dead letter %s lacks error headers: %v", src, r.Headers)
					}
					if itest.HeaderValue(r, "trace") == "" || len(r.Value) == 0 || len(r.Value) > 100 {
						t.Errorf("dead letter %s is not the original record: %d-byte value, headers %v", src, len(r.Value), r.Headers)
					}
				}
				bad := kinds["malformed"] + kinds["panic"] + kinds["big"]
				wantOut, wantDead := n-bad, bad
				if policy == pipeline.Skip {
					wantDead = 0
				}
				if len(outs) != wantOut || len(dead) != wantDead {
					t.Errorf("%d outputs and %d dead letters, want %d and %d (inputs by kind: %v)", len(outs), len(dead), wantOut, wantDead, kinds)
				}
				for src, c := range seen {
					if c != 1 {
						t.Errorf("input %s appears %d times", src, c)
					}
				}
				m := a.PipelineMetrics
				if got := testutil.ToFloat64(m.DLQ); int(got) != wantDead {
					t.Errorf("records_dlq_total = %v, want %d", got, wantDead)
				}
				if policy == pipeline.Skip {
					if got := testutil.ToFloat64(m.Skipped); int(got) != bad {
						t.Errorf("records_skipped_total = %v, want %d", got, bad)
					}
				}
				if got := testutil.ToFloat64(m.Retries); int(got) < 2*kinds["flaky"] {
					t.Errorf("transform_retries_total = %v, want at least %d", got, 2*kinds["flaky"])
				}
				if got := testutil.ToFloat64(m.TransformErrors.WithLabelValues("parse", "panic")); got < float64(kinds["panic"]) {
					t.Errorf("transform_errors_total{class=panic} = %v, want at least %d", got, kinds["panic"])
				}
				var reasons []string
				for _, r := range dead {
					reasons = append(reasons, itest.HeaderValue(r, record.HeaderErrorTransform))
				}
				if policy == pipeline.DeadLetter && !strings.Contains(strings.Join(reasons, ","), "produce") {
					t.Errorf("no dead letter for an unproducible output (transforms: %v)", reasons)
				}
				if policy != pipeline.DeadLetter {
					return
				}

				// Replay: a processor of its own reads the dead letters into the
				// output with a chain that no longer fails; then every input is
				// in the output exactly once (by its original trace header).
				replay := itest.Unique("replay-group")
				r := tg.Start(t, itest.InstanceOpts{Group: replay, TxnID: replay + "-a", Topics: []string{dlq}, Out: out})
				// The dead-letter topic is transactional: its last offsets are
				// markers, so wait for the records rather than the log end.
				itest.WaitFor(t, 60*time.Second, "the replay to commit every dead letter", func() bool { return r.Pipeline.Stats().Consumed == uint64(len(dead)) })
				r.Stop(t)
				traces := map[string]int{}
				for _, rec := range tg.ReadAll(t, out, true) {
					traces[itest.HeaderValue(rec, "trace")]++
				}
				for i := range n {
					if c := traces[strconv.Itoa(i)]; c != 1 {
						t.Errorf("after the replay, input %d is in the output %d times", i, c)
					}
				}
			})
		})
	}
}

// A transform too slow for the transaction's time budget: the watchdog
// aborts the transaction before the transaction timeout would fence the
// producer, batches shrink until they fit, and the output is still exactly
// once.
func TestWatchdogShrinksBatches(t *testing.T) {
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("slow-in"), N: 400, Keys: 20}
		out, group := itest.Unique("slow-out"), itest.Unique("slow-group")
		tg.NewTopics(t, 2, in.Topic, out)
		tg.Produce(t, in, 0, in.N)
		reg := &transform.Registry{}
		reg.Register("slow", transform.Plain("", func() (transform.Transform, error) {
			return transform.Func(func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
				time.Sleep(2 * time.Millisecond)
				return append(out, r), nil
			}), nil
		}))
		chain, err := reg.Build([]transform.Entry{{Name: "slow"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out, Chain: chain,
			MaxRecords: 1000, CommitInterval: time.Second, TxnBudget: 150 * time.Millisecond})
		tg.WaitCaughtUp(t, group, in.Topic, a)
		a.Stop(t)
		if got := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues("watchdog")); got < 1 {
			t.Errorf("aborted{reason=watchdog} = %v, want at least 1", got)
		}
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
	})
}
