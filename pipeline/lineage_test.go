package pipeline

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

func header(r *kgo.Record, key string) (string, int) {
	var v string
	n := 0
	for _, h := range r.Headers {
		if h.Key == key {
			v = string(h.Value)
			n++
		}
	}
	return v, n
}

// upstream is a record as an upstream processor left it: a header of its
// own and lineage of both forms, all of which a stamp replaces.
func upstream() *kgo.Record {
	return &kgo.Record{Headers: []kgo.RecordHeader{
		{Key: "trace", Value: []byte("abc")},
		{Key: record.HeaderSourceTopic, Value: []byte("upstream")},
		{Key: record.HeaderSource, Value: []byte("upstream/0/1")},
		{Key: record.HeaderSourceOffset, Value: []byte("7")},
	}}
}

func TestLineageStampsAndReplacesUpstreamLineage(t *testing.T) {
	src := record.Source{Topic: "orders", Partition: 12, Offset: 9_876_543_210}
	for legacy, want := range map[bool]map[string]string{
		false: {"trace": "abc", record.HeaderSource: "orders/12/9876543210"},
		true:  {"trace": "abc", record.HeaderSourceTopic: "orders", record.HeaderSourcePartition: "12", record.HeaderSourceOffset: "9876543210"},
	} {
		r := upstream()
		newLineage(legacy).stamp(r, src)
		for key, v := range want {
			if got, n := header(r, key); got != v || n != 1 {
				t.Errorf("legacy %v: header %s = %q (%d times), want %q once", legacy, key, got, n, v)
			}
		}
		if len(r.Headers) != len(want) {
			t.Errorf("legacy %v: %d headers, want %d", legacy, len(r.Headers), len(want))
		}
		if got, ok := Lineage(r); !ok || got != src {
			t.Errorf("legacy %v: Lineage = %v, %v; want %v", legacy, got, ok, src)
		}
	}
}

// Records stamped before a chunk runs out keep their values; the per-record
// cost is amortised to no allocation, in either form.
func TestLineageChunksKeepEarlierRecordsAndDoNotAllocate(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		l := newLineage(legacy)
		recs := make([]*kgo.Record, 3*hdrChunk)
		for i := range recs {
			recs[i] = &kgo.Record{}
			l.stamp(recs[i], record.Source{Topic: "in", Partition: int32(i % 6), Offset: int64(i)})
		}
		for i, r := range recs {
			if got, ok := Lineage(r); !ok || got != (record.Source{Topic: "in", Partition: int32(i % 6), Offset: int64(i)}) {
				t.Fatalf("legacy %v: record %d has lineage %v, %v", legacy, i, got, ok)
			}
		}
		l.reset()
		r := &kgo.Record{}
		allocs := testing.AllocsPerRun(1000, func() {
			r.Headers = nil
			l.stamp(r, record.Source{Topic: "in", Partition: 3, Offset: 123456})
			if len(l.hdrs) > hdrChunk-8 {
				l.reset()
			}
		})
		if allocs != 0 {
			t.Errorf("legacy %v: stamp allocates %.1f times per record, want 0", legacy, allocs)
		}
	}
}

// The compact form's byte chunk takes whole values and is replaced, not
// grown, when the next value might not fit.
func TestLineageCompactChunkIsReplaced(t *testing.T) {
	l := newLineage(false)
	first := &kgo.Record{}
	l.stamp(first, record.Source{Topic: "in", Partition: 1, Offset: 5})
	for len(l.digits)+len("in")+33 <= cap(l.digits) {
		l.stamp(&kgo.Record{}, record.Source{Topic: "in", Partition: 1, Offset: 1_000_000})
	}
	old := cap(l.digits)
	l.stamp(&kgo.Record{}, record.Source{Topic: "in", Partition: 1, Offset: 7})
	if old != digitChunk || cap(l.digits) != digitChunk || len(l.digits) != len("in/1/7") {
		t.Errorf("the value after a full chunk: %d of %d bytes (was cap %d), want a new chunk holding %d", len(l.digits), cap(l.digits), old, len("in/1/7"))
	}
	if got, _ := header(first, record.HeaderSource); got != "in/1/5" {
		t.Errorf("the first record's lineage is %q after the chunk was replaced", got)
	}
}

// typical is a 100-byte record as the issue sizes it: no key, no other
// header, read from orders partition 3 at an offset about 10^7.
var typical = record.Source{Topic: "orders", Partition: 3, Offset: 10_000_000}

// lineageBytes is what lineage of the given form adds to a 100-byte
// record on the wire (Kafka's record format v2, as wireBytes counts).
func lineageBytes(legacy bool) int {
	bare := &kgo.Record{Value: make([]byte, 100)}
	r := &kgo.Record{Value: bare.Value}
	newLineage(legacy).stamp(r, typical)
	return wireBytes(r) - wireBytes(bare)
}

// What each form costs a typical record: the compact header less than
// two fifths of the legacy three.
func TestLineageBytesPerRecord(t *testing.T) {
	compact, legacy := lineageBytes(false), lineageBytes(true)
	// processor.source (1+16) and orders/3/10000000 (1+17); the three
	// keys (3+71) and values orders, 3 and 10000000 (3+15).
	if compact != 35 || legacy != 92 {
		t.Errorf("lineage adds %d bytes compact, %d legacy to a 100-byte record; want 35 and 92", compact, legacy)
	}
	if got, ok := record.Lineage(record.LineageHeaders(typical)); !ok || got != typical {
		t.Errorf("the typical record's lineage reads back as %v, %v", got, ok)
	}
}

// benchTxn is how many records a transaction of the stamping benchmark
// holds: the chunks are reset after it, as the loop resets them when a
// transaction ends, so B/op is the chunks' amortised cost.
const benchTxn = 10_000

// BenchmarkLineageStamp stamps one record per iteration in each form and
// reports the bytes lineage adds to a typical 100-byte record.
func BenchmarkLineageStamp(b *testing.B) {
	for _, form := range []struct {
		name   string
		legacy bool
	}{{"compact", false}, {"legacy", true}} {
		b.Run(form.name, func(b *testing.B) {
			l := newLineage(form.legacy)
			r := &kgo.Record{}
			b.ReportAllocs()
			for i := range b.N {
				r.Headers = nil
				l.stamp(r, record.Source{Topic: typical.Topic, Partition: int32(i % 6), Offset: typical.Offset + int64(i)})
				if i%benchTxn == benchTxn-1 {
					l.reset()
				}
			}
			b.ReportMetric(float64(lineageBytes(form.legacy)), "lineage-B/rec")
		})
	}
}

// BenchmarkLineageRead reads lineage back in each form, as the auditor
// does for every output.
func BenchmarkLineageRead(b *testing.B) {
	for _, form := range []struct {
		name string
		hs   []kgo.RecordHeader
	}{{"compact", record.LineageHeaders(typical)}, {"legacy", record.LegacyLineageHeaders(typical)}} {
		b.Run(form.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, ok := record.Lineage(form.hs); !ok {
					b.Fatal("no lineage")
				}
			}
		})
	}
}

// BenchmarkLineageTransaction stamps the compact lineage header on the
// outputs of one 100,000-record transaction per op, then resets the chunks
// as the end of a transaction does: after the first transaction, the
// chunks of the ones before are reused. "interleaved" changes partition
// every record (the worst case); "runs" stamps runs of 1,000 consecutive
// offsets of one partition, as a poll over a backlog hands them over.
func BenchmarkLineageTransaction(b *testing.B) {
	const perTxn = 100_000
	for _, form := range []struct {
		name string
		run  int
	}{{"interleaved", 1}, {"runs", 1000}} {
		b.Run(form.name, func(b *testing.B) {
			l := newLineage(false)
			recs := make([]kgo.Record, perTxn)
			b.ReportAllocs()
			for range b.N {
				for i := range recs {
					recs[i].Headers = nil
					l.stamp(&recs[i], record.Source{Topic: "orders", Partition: int32(i / form.run % 6), Offset: 10_000_000 + int64(i)})
				}
				l.reset()
			}
		})
	}
}

// The compact value is record.AppendLineage's, whatever the order of the
// sources: the stamper keeps the last topic and partition's prefix, which
// must follow every change of either (a topic sharing a prefix of another,
// the same partition of another topic, an offset with more digits).
func TestLineageCompactMatchesAppendLineage(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 5))
	topics := []string{"in", "in2", "i", "orders", "orders.v2"}
	l := newLineage(false)
	var recs []*kgo.Record
	var srcs []record.Source
	for i := 0; i < 20_000; i++ {
		src := record.Source{Topic: topics[rng.IntN(len(topics))], Partition: int32(rng.IntN(3)), Offset: rng.Int64N(1 << uint(rng.IntN(63)))}
		if i > 0 && rng.IntN(4) > 0 { // mostly runs of one partition
			src.Topic, src.Partition = srcs[i-1].Topic, srcs[i-1].Partition
		}
		r := &kgo.Record{}
		l.stamp(r, src)
		recs, srcs = append(recs, r), append(srcs, src)
	}
	checkCompactValues(t, recs, srcs)
}

// A run of one partition's consecutive offsets counts the last value's
// digits up rather than formatting each offset: the values stay
// record.AppendLineage's across carries (9 to 10, 999 to 1000), gaps,
// a partition's return after another's run, an offset going back, and at
// the ends of int64.
func TestLineageCompactCountsUpLikeAppendLineage(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 6))
	starts := []int64{0, 1, 8, 95, 998, 99_999_990, 1<<31 - 5, 1<<63 - 3, -3}
	l := newLineage(false)
	var recs []*kgo.Record
	var srcs []record.Source
	src := record.Source{Topic: "in", Partition: 0}
	for i := 0; i < 20_000; i++ {
		switch k := rng.IntN(40); {
		case i == 0 || k == 0:
			src.Offset = starts[rng.IntN(len(starts))]
		case k == 1:
			src.Partition = int32(rng.IntN(3))
		case k == 2:
			src.Offset += int64(rng.IntN(5)) - 2 // a gap, the same offset or one back
		case src.Offset < 1<<63-1:
			src.Offset++
		}
		r := &kgo.Record{}
		l.stamp(r, src)
		recs, srcs = append(recs, r), append(srcs, src)
	}
	checkCompactValues(t, recs, srcs)
	for _, d := range []string{"9", "99", ""} {
		if countUp([]byte(d)) {
			t.Errorf("countUp(%q) reports it counted up", d)
		}
	}
}

// checkCompactValues fails t unless every record of recs carries one
// compact lineage header, record.AppendLineage's value of its source.
func checkCompactValues(t *testing.T, recs []*kgo.Record, srcs []record.Source) {
	t.Helper()
	for i, r := range recs {
		want := string(record.AppendLineage(nil, srcs[i]))
		if got, n := header(r, record.HeaderSource); got != want || n != 1 {
			t.Fatalf("record %d of %v: %q (%d headers), want %q", i, srcs[i], got, n, want)
		}
	}
}
