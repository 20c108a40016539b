package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/identity"
	"github.com/streamproc/processor/txn"
)

// Dead letters that cannot be written: a dead-letter topic whose
// max.message.bytes is below the failing records' size.
const (
	dlMaxMessageBytes = 20_000 // the dead-letter topic's max.message.bytes
	dlValueLimit      = 30_000 // the chain fails values larger than this
	dlBigValue        = 50_000 // the size of a bad record's value
	dlBigKey          = 40_000 // a key too large for the dead-letter topic on its own
)

// dlLimitErr is the start of the error the size-limit transform fails with:
// the original error every dead letter must carry.
const dlLimitErr = "value over the size limit"

// sizeLimitChain is identity followed by "sizecheck@big", which fails every
// record whose value is larger than limit with a permanent error.
func sizeLimitChain(t testing.TB, limit int) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("identity", transform.Plain("", func() (transform.Transform, error) { return identity.Transform{}, nil }))
	reg.Register("sizecheck", transform.Plain("", func() (transform.Transform, error) {
		return transform.Func(func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			if len(r.Value) > limit {
				return out, fmt.Errorf("%s: %d bytes, more than %d", dlLimitErr, len(r.Value), limit)
			}
			return append(out, r), nil
		}), nil
	}))
	c, err := reg.Build([]transform.Entry{{Name: "identity"}, {Name: "sizecheck", Alias: "big"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitStopped waits for in to stop on its own and returns Run's error; the
// test fails if it still runs after timeout.
func waitStopped(t testing.TB, in *itest.Instance, timeout time.Duration, what string) error {
	t.Helper()
	select {
	case <-in.Done:
	case <-time.After(timeout):
		t.Fatalf("the instance still runs %s after %s", timeout, what)
	}
	in.Stopped = true
	return in.Err
}

// dlBadRecord is an input record the size-limit chain fails: an
// incompressible value of dlBigValue bytes, and a trace header naming it.
func dlBadRecord(topic string, i int, key []byte) *kgo.Record {
	if key == nil {
		key = []byte("bad" + strconv.Itoa(i))
	}
	return &kgo.Record{Topic: topic, Key: key, Value: itest.Incompressible(dlBigValue, uint64(i)),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("bad-" + strconv.Itoa(i))}}}
}

// A record fails in the chain and its dead letter, value included, is too
// large for the dead-letter topic: the dead letter is written without the
// value, with processor.error.value.dropped saying the topic's limit, and
// still carries the original transform error (not the produce error) and
// the chain entry that failed. The good records around it are output exactly once, and the
// instance keeps running.
func TestDeadLetterValueDropped(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("dlbig-in"), N: 1200, Keys: 24}
		out, dlq, group := itest.Unique("dlbig-out"), itest.Unique("dlbig-dlq"), itest.Unique("dlbig-group")
		tg.NewTopics(t, 3, in.Topic, out)

		// Good and bad records interleaved, the bad ones spread over the
		// input partitions. Each bad record's key sends its dead letter to
		// a dead-letter partition of its own, so that no two dead letters
		// share a produce batch: the broker accepts or rejects a batch as
		// a whole.
		const nBad = 6
		tg.CreateTopicWithConfigs(t, nBad, map[string]string{"max.message.bytes": strconv.Itoa(dlMaxMessageBytes)}, dlq)
		keys := keysForPartitions(dlq, nBad)
		var bad []*kgo.Record
		tg.Produce(t, in, 0, in.N/2)
		for i := range nBad / 2 {
			bad = append(bad, tg.SyncProduce(t, dlBadRecord(in.Topic, i, keys[i]))...)
		}
		tg.Produce(t, in, in.N/2, in.N)
		for i := nBad / 2; i < nBad; i++ {
			bad = append(bad, tg.SyncProduce(t, dlBadRecord(in.Topic, i, keys[i]))...)
		}
		wantBad := map[string]*kgo.Record{}
		for _, r := range bad {
			wantBad[itest.SrcKey(r)] = r
		}

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
			Chain: sizeLimitChain(t, dlValueLimit), OnError: pipeline.DeadLetter, DLQTopic: dlq, MaxRecords: 300})
		tg.WaitCaughtUpWithin(t, 45*time.Second, group, in.Topic, a)
		select {
		case <-a.Done:
			t.Fatalf("the instance stopped: %v", a.Err)
		default:
		}
		a.Stop(t)

		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))

		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != nBad {
			t.Errorf("%d dead letters, want %d (one per bad record)", len(dead), nBad)
		}
		seen := map[string]int{}
		for _, r := range dead {
			src, ok := itest.SourceOf(r)
			if !ok {
				t.Errorf("dead letter without lineage headers: %v", headerKeys(r))
				continue
			}
			seen[src]++
			orig, ok := wantBad[src]
			if !ok {
				t.Errorf("dead letter for %s, which is not a bad record", src)
				continue
			}
			if len(r.Value) != 0 {
				t.Errorf("dead letter %s has a %d-byte value, want it dropped", src, len(r.Value))
			}
			if !strings.Contains(itest.HeaderValue(r, record.HeaderErrorValueDropped), strconv.Itoa(dlMaxMessageBytes)+" bytes the dead-letter topic takes") {
				t.Errorf("dead letter %s lacks %s: %v", src, record.HeaderErrorValueDropped, headerKeys(r))
			}
			if e := itest.HeaderValue(r, record.HeaderError); !strings.Contains(e, dlLimitErr) || strings.Contains(strings.ToUpper(e), "TOO_LARGE") {
				t.Errorf("dead letter %s: %s = %q, want the original transform error %q", src, record.HeaderError, e, dlLimitErr)
			}
			if st := itest.HeaderValue(r, record.HeaderErrorTransform); st != "sizecheck@big" {
				t.Errorf("dead letter %s: %s = %q, want the failed chain entry sizecheck@big", src, record.HeaderErrorTransform, st)
			}
			if at := itest.HeaderValue(r, record.HeaderErrorAttempts); at != "1" {
				t.Errorf("dead letter %s: %s = %q, want 1 (a permanent error is not retried)", src, record.HeaderErrorAttempts, at)
			}
			if string(r.Key) != string(orig.Key) || itest.HeaderValue(r, "trace") != itest.HeaderValue(orig, "trace") {
				t.Errorf("dead letter %s: key %q trace %q, want the original's %q and %q", src, r.Key, itest.HeaderValue(r, "trace"), orig.Key, itest.HeaderValue(orig, "trace"))
			}
		}
		for src := range wantBad {
			if seen[src] != 1 {
				t.Errorf("bad record %s has %d dead letters, want 1", src, seen[src])
			}
		}
		if got := testutil.ToFloat64(a.PipelineMetrics.DLQ); int(got) != nBad {
			t.Errorf("records_dlq_total = %v, want %d", got, nBad)
		}
		// The processor knows the dead-letter topic's max.message.bytes,
		// so it drops the values before producing: no transaction aborts
		// for a dead letter the topic would reject.
		if got := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonProduce))); got != 0 {
			t.Errorf("aborted{reason=%s} = %v, want 0", txn.ReasonProduce, got)
		}
	})
}

// A failed record whose dead letter is too large even without its value
// (its key alone is over the dead-letter topic's max.message.bytes) stops
// the instance: Run returns a *pipeline.RecordError naming the record's
// topic, partition and offset and the original error, never a panic, and
// nothing from that record on is committed.
func TestDeadLetterTooLargeEvenWithoutValue(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("dlkey-in"), N: 400, Keys: 8}
		out, dlq, group := itest.Unique("dlkey-out"), itest.Unique("dlkey-dlq"), itest.Unique("dlkey-group")
		tg.NewTopics(t, 1, in.Topic, out)
		tg.CreateTopicWithConfigs(t, 1, map[string]string{"max.message.bytes": strconv.Itoa(dlMaxMessageBytes)}, dlq)

		tg.Produce(t, in, 0, in.N/2)
		bad := tg.SyncProduce(t, dlBadRecord(in.Topic, 0, itest.Incompressible(dlBigKey, 99)))[0]
		tg.Produce(t, in, in.N/2, in.N)

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
			Chain: sizeLimitChain(t, dlValueLimit), OnError: pipeline.DeadLetter, DLQTopic: dlq, MaxRecords: 100})
		err := waitStopped(t, a, 30*time.Second, "its bad record's dead letter could not be written even without the value")
		var re *pipeline.RecordError
		if !errors.As(err, &re) {
			t.Fatalf("Run returned %v, want a *pipeline.RecordError", err)
		}
		want := fmt.Sprintf("record topic %s partition %d offset %d", bad.Topic, bad.Partition, bad.Offset)
		if re.Source.Topic != bad.Topic || re.Source.Partition != bad.Partition || re.Source.Offset != bad.Offset || !strings.Contains(err.Error(), want) {
			t.Errorf("Run returned %q for %s/%d/%d, want it to name the bad record: %q", err, re.Source.Topic, re.Source.Partition, re.Source.Offset, want)
		}
		if !strings.Contains(err.Error(), dlLimitErr) {
			t.Errorf("Run returned %q, want it to quote the record's original error %q", err, dlLimitErr)
		}
		if c, ok := tg.CommittedOffsets(t, group, in.Topic)[bad.Partition]; ok && c > bad.Offset {
			t.Errorf("partition %d committed to %d, past the failed record at %d", bad.Partition, c, bad.Offset)
		}
		// What was committed before the bad record is in the output once;
		// nothing of the bad record is anywhere.
		for _, r := range tg.ReadAll(t, dlq, true) {
			t.Errorf("a dead letter was committed: key of %d bytes, headers %v", len(r.Key), headerKeys(r))
		}
		outs := tg.ReadAll(t, out, true)
		if len(outs) > int(bad.Offset) {
			t.Errorf("%d outputs committed, more than the %d records before the bad one", len(outs), bad.Offset)
		}
	})
}

// keysForPartitions returns n keys that the producer's default partitioner
// (murmur2 of the key, as Kafka's) sends to partitions 0 to n-1 of a topic
// with n partitions, one each.
func keysForPartitions(topic string, n int32) [][]byte {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	keys := make([][]byte, n)
	for i, found := 0, int32(0); found < n; i++ {
		k := []byte("bad" + strconv.Itoa(i))
		if p := part.Partition(&kgo.Record{Key: k}, int(n)); keys[p] == nil {
			keys[p] = k
			found++
		}
	}
	return keys
}

// headerKeys lists r's header keys, for failure messages.
func headerKeys(r *kgo.Record) []string {
	ks := make([]string, 0, len(r.Headers))
	for _, h := range r.Headers {
		ks = append(ks, h.Key)
	}
	return ks
}
