package pipeline

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
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

func TestLineageStampsAndReplacesUpstreamLineage(t *testing.T) {
	l := newLineage()
	r := &kgo.Record{Headers: []kgo.RecordHeader{
		{Key: "trace", Value: []byte("abc")},
		{Key: HeaderSourceTopic, Value: []byte("upstream")},
		{Key: HeaderSourceOffset, Value: []byte("7")},
	}}
	l.stamp(r, transform.Source{Topic: "orders", Partition: 12, Offset: 9_876_543_210})
	for key, want := range map[string]string{
		"trace": "abc", HeaderSourceTopic: "orders", HeaderSourcePartition: "12", HeaderSourceOffset: "9876543210",
	} {
		if got, n := header(r, key); got != want || n != 1 {
			t.Errorf("header %s = %q (%d times), want %q once", key, got, n, want)
		}
	}
	if len(r.Headers) != 4 {
		t.Errorf("%d headers, want 4", len(r.Headers))
	}
}

// Records stamped before a chunk runs out keep their values; the per-record
// cost is amortised to no allocation.
func TestLineageChunksKeepEarlierRecordsAndDoNotAllocate(t *testing.T) {
	l := newLineage()
	recs := make([]*kgo.Record, 3*hdrChunk)
	for i := range recs {
		recs[i] = &kgo.Record{}
		l.stamp(recs[i], transform.Source{Topic: "in", Partition: int32(i % 6), Offset: int64(i)})
	}
	for i, r := range recs {
		if got, _ := header(r, HeaderSourceOffset); got != strconv.Itoa(i) {
			t.Fatalf("record %d has offset header %q", i, got)
		}
		if got, _ := header(r, HeaderSourcePartition); got != strconv.Itoa(i%6) {
			t.Fatalf("record %d has partition header %q", i, got)
		}
	}
	l.reset()
	r := &kgo.Record{}
	allocs := testing.AllocsPerRun(1000, func() {
		r.Headers = nil
		l.stamp(r, transform.Source{Topic: "in", Partition: 3, Offset: 123456})
		if len(l.hdrs) > hdrChunk-8 {
			l.reset()
		}
	})
	if allocs != 0 {
		t.Errorf("stamp allocates %.1f times per record, want 0", allocs)
	}
}

func BenchmarkLineageStamp(b *testing.B) {
	l := newLineage()
	r := &kgo.Record{}
	b.ReportAllocs()
	for i := range b.N {
		r.Headers = nil
		l.stamp(r, transform.Source{Topic: "in", Partition: int32(i % 6), Offset: int64(i)})
		if len(l.hdrs) > hdrChunk-8 {
			l.reset()
		}
	}
}
