package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// timeProbe is a stateful stage that emits, for each record, its source
// offset and the stream time it ran with: "<partition>/<offset>/<ms>"
// (ms -1 when none is known).
type timeProbe struct{}

func (timeProbe) Ordered() bool    { return true }
func (timeProbe) Stores() []string { return []string{"probe"} }
func (timeProbe) KeyScoped() bool  { return true }
func (timeProbe) Process(ctx context.Context, src record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	ms, ok := transform.StreamMillisOf(ctx)
	if !ok {
		ms = -1
	}
	if tm, ok2 := transform.StreamTimeOf(ctx); ok != ok2 || (ok && tm.UnixMilli() != ms) {
		return out, fmt.Errorf("StreamTimeOf %v, %t disagrees with StreamMillisOf %d, %t", tm, ok2, ms, ok)
	}
	rec.Value = fmt.Appendf(nil, "%d/%d/%d", src.Partition, src.Offset, ms)
	return append(out, rec), nil
}

func init() {
	transform.Register("statetesttime", transform.Plain("emits the stream time of each record", func() (transform.Transform, error) {
		return timeProbe{}, nil
	}))
}

// timedInputs are n records over the partitions with timestamps that
// mostly rise and often fall back (a late record, up to a minute), all
// in the past, from base.
func timedInputs(e *loopEnv, n int, base time.Time, r *rand.Rand) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		ts := base.Add(time.Duration(i) * time.Second)
		if r.IntN(3) == 0 {
			ts = ts.Add(-time.Duration(r.IntN(60)) * time.Second)
		}
		recs[i] = &kgo.Record{Topic: e.in, Partition: int32(r.IntN(loopPartitions)), Key: []byte("k" + strconv.Itoa(i%5)),
			Value: []byte(strconv.Itoa(i)), Timestamp: ts}
	}
	return recs
}

// wantStreamTimes is the reference: per partition and offset, the largest
// timestamp of the partition's inputs up to that offset.
func wantStreamTimes(inputs []*kgo.Record) map[string]int64 {
	want := map[string]int64{}
	last := map[int32]int64{}
	byPart := map[int32][]*kgo.Record{}
	for _, r := range inputs {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	for p, rs := range byPart {
		last[p] = -1
		for _, r := range rs { // produced in offset order per partition
			last[p] = max(last[p], r.Timestamp.UnixMilli())
			want[fmt.Sprintf("%d/%d", p, r.Offset)] = last[p]
		}
	}
	return want
}

// checkStreamTimes checks every committed output of the probe against
// the reference, each input once.
func checkStreamTimes(t *testing.T, e *loopEnv, topic string, want map[string]int64) {
	t.Helper()
	got := map[string]int64{}
	for _, r := range e.read(topic, true) {
		parts := strings.Split(string(r.Value), "/")
		ms, _ := strconv.ParseInt(parts[2], 10, 64)
		k := parts[0] + "/" + parts[1]
		if _, dup := got[k]; dup {
			t.Errorf("input %s has two committed outputs", k)
		}
		got[k] = ms
	}
	bad := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			if bad++; bad <= 5 {
				t.Errorf("input %s ran with stream time %d (present %t), want %d", k, g, ok, w)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d outputs for %d inputs", len(got), len(want))
	}
}

// Stream time is a function of the input in offset order: the same input
// read by one large transaction after another, and by transactions of a
// few records with aborts, workers sharing partitions and a restart half
// way (which must go on from the stream time committed with the offsets,
// as the restart's first records are older than what came before), gives
// every record the same stream time, the running maximum of its
// partition's timestamps. The committed offsets' metadata carries it.
func TestStreamTimeIndependentOfBatching(t *testing.T) {
	e := newLoopEnv(t)
	e.c.CreateTopics(t, loopPartitions, nil, "changelog", "out2")
	r := rand.New(rand.NewPCG(4, 0))
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	first := timedInputs(e, 300, base, r)
	e.produceInputs(first, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	build := func() *transform.Chain { return builtinChain(t, "statetesttime") }

	// Batched small, aborting, with a second worker, restarted half way.
	o := Options{State: newMemState(), MaxRecordsPerTxn: 7, Chains: []*transform.Chain{build()},
		InjectAbort: func(seq uint64) bool { return seq%4 == 0 }}
	run := e.start("small", "t-small", build(), o)
	eventually(t, 30*time.Second, "the first half committed", run, func() bool { return e.caughtUp("small") })
	run.stop(t, 10*time.Second)
	// The second half begins well before the first half's end.
	second := timedInputs(e, 300, base.Add(-10*time.Minute), r)
	e.produceInputs(second, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	o.Chains = []*transform.Chain{build()}
	o.State = newMemState()
	run = e.start("small", "t-small", build(), o)
	eventually(t, 30*time.Second, "the second half committed", run, func() bool { return e.caughtUp("small") })
	run.stop(t, 10*time.Second)

	// All at once, one worker, to another topic.
	run = e.start("large", "t-large", build(), Options{State: newMemState(), MaxRecordsPerTxn: 100000, OutputTopic: "out2"})
	eventually(t, 30*time.Second, "every input committed", run, func() bool { return e.caughtUp("large") })
	run.stop(t, 10*time.Second)

	want := wantStreamTimes(e.inputs)
	checkStreamTimes(t, e, e.out, want)
	checkStreamTimes(t, e, "out2", want)

	// The metadata of each committed offset: t is the stream time of the
	// records before it, at that offset.
	fetched, err := e.adm.FetchOffsets(context.Background(), "small")
	if err != nil {
		t.Fatal(err)
	}
	fetched.Each(func(o kadm.OffsetResponse) {
		p := txn.ParseProgress(o.Metadata)
		ms, ok := p.TimeAtOffset(o.At)
		if w := want[fmt.Sprintf("%d/%d", o.Partition, o.At-1)]; !ok || ms != w {
			t.Errorf("partition %d committed at %d with metadata %q: stream time %d (%t), want %d", o.Partition, o.At, o.Metadata, ms, ok, w)
		}
	})
}

// A record stamped far in the future (here a microsecond timestamp read
// as milliseconds, some 50,000 years ahead) moves stream time no further
// than the wall clock plus MaxFutureSkew, and is counted; the records
// after it run with that bounded time.
func TestStreamTimeFutureBounded(t *testing.T) {
	e := newLoopEnv(t)
	e.c.CreateTopics(t, loopPartitions, nil, "changelog")
	now := time.Now()
	recs := []*kgo.Record{
		{Topic: e.in, Partition: 0, Value: []byte("a"), Timestamp: now.Add(-time.Minute)},
		{Topic: e.in, Partition: 0, Value: []byte("b"), Timestamp: time.UnixMilli(now.UnixMicro())},
		{Topic: e.in, Partition: 0, Value: []byte("c"), Timestamp: now.Add(-time.Hour)},
		{Topic: e.in, Partition: 1, Value: []byte("d"), Timestamp: now.Add(30 * time.Minute)},
	}
	e.produceInputs(recs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	skew := 10 * time.Minute
	before := time.Now()
	run := e.start("g", "t1", builtinChain(t, "statetesttime"), Options{State: newMemState(), MaxFutureSkew: skew})
	eventually(t, 30*time.Second, "every input committed", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	after := time.Now()
	got := map[string]int64{}
	for _, r := range e.read(e.out, true) {
		parts := strings.Split(string(r.Value), "/")
		ms, _ := strconv.ParseInt(parts[2], 10, 64)
		got[parts[0]+"/"+parts[1]] = ms
	}
	if got["0/0"] != recs[0].Timestamp.UnixMilli() {
		t.Errorf("first record: stream time %d, want its own %d", got["0/0"], recs[0].Timestamp.UnixMilli())
	}
	lo, hi := before.Add(skew).UnixMilli(), after.Add(skew).UnixMilli()
	for _, k := range []string{"0/1", "0/2", "1/0"} {
		if got[k] < lo || got[k] > hi {
			t.Errorf("record %s: stream time %s, want the wall clock plus %s, within [%s, %s]", k,
				time.UnixMilli(got[k]).Format(time.RFC3339), skew, time.UnixMilli(lo).Format(time.RFC3339), time.UnixMilli(hi).Format(time.RFC3339))
		}
	}
	if n := testutil.ToFloat64(run.pm.Future); n != 2 {
		t.Errorf("processor_records_future_total = %v, want 2", n)
	}
}

// While the state's expiry is behind (a bound stopped it with expired
// entries left), each poll takes one record, so that deletions outrun
// new keys; otherwise the poll is sized as ever.
func TestPollSizeWhileExpiryBehind(t *testing.T) {
	p := unitPipeline(t, nil, Options{MaxRecordsPerTxn: 100})
	p.pace.max = 100
	if got := p.pollSize(); got != 100 {
		t.Fatalf("pollSize() = %d, want 100", got)
	}
	p.st.behind = true
	if got := p.pollSize(); got != 1 {
		t.Errorf("pollSize() while expiry is behind = %d, want 1", got)
	}
}
