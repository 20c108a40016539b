package pipeline

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// murmur2 is Kafka's: the values of Kafka's own UtilsTest.testMurmur2.
func TestMurmur2KafkaVectors(t *testing.T) {
	for key, want := range map[string]int32{
		"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, "abc": 479470107,
	} {
		if got := int32(murmur2([]byte(key))); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", key, got, want)
		}
	}
}

// KeyPartition gives every key the partition franz-go's key partitioner
// (Kafka's default for keyed records) gives it, for random keys of every
// length and several partition counts.
func TestKeyPartitionAsProducers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range 20000 {
		key := make([]byte, rng.IntN(40))
		for j := range key {
			key[j] = byte(rng.UintN(256))
		}
		n := []int32{1, 3, 4, 12, 100}[i%5]
		want := int32(ref.Partition(&kgo.Record{Key: key}, int(n)))
		if got := KeyPartition(key, n); got != want {
			t.Fatalf("KeyPartition(%x, %d) = %d, franz-go's %d", key, n, got, want)
		}
	}
}

// groupKeyer keys records by their value.
type groupKeyer struct{}

func (groupKeyer) GroupKey(_ context.Context, r *kgo.Record) ([]byte, error) { return r.Value, nil }

// A record through hopOut and back through hopIn has its key, its routed
// topic and its headers again; in between it is keyed by its group key,
// in that key's partition, and names its input; unhop makes a failed one
// what it was before the hop and returns its input.
func TestHopRoundTrip(t *testing.T) {
	src := record.Source{Topic: "orders", Partition: 3, Offset: 41}
	for _, c := range []struct {
		key   []byte
		topic string
	}{{[]byte("order-1"), ""}, {nil, ""}, {[]byte{}, "routed"}, {[]byte{0xff, 0}, "x"}} {
		r := &kgo.Record{Key: c.key, Value: []byte(`"alice"`), Topic: c.topic,
			Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: record.HeaderSource, Value: []byte("up/0/1")}}}
		out, err := (&hopOut{gk: groupKeyer{}, topic: "hop", parts: 4}).Process(t.Context(), src, r, nil)
		if err != nil || len(out) != 1 {
			t.Fatal(out, err)
		}
		h := out[0]
		if h.Topic != "hop" || string(h.Key) != `"alice"` || h.Partition != KeyPartition([]byte(`"alice"`), 4) {
			t.Fatalf("hop record %s key %q partition %d", h.Topic, h.Key, h.Partition)
		}
		if o, ok := record.Lineage(h.Headers); !ok || o != (record.Source{Topic: "orders", Partition: 3, Offset: 41}) {
			t.Fatalf("hop record names input %v %v", o, ok)
		}
		p := &Pipeline{}
		if o := p.origin(record.Source{Topic: "hop"}, h); o != src {
			t.Fatalf("origin %v, want %v", o, src)
		}
		fetched := &kgo.Record{Key: h.Key, Value: h.Value, Headers: h.Headers}
		back, _ := hopIn{}.Process(t.Context(), record.Source{Topic: "hop"}, fetched, nil)
		b := back[0]
		if !bytes.Equal(b.Key, c.key) || (b.Key == nil) != (c.key == nil) || b.Topic != c.topic ||
			len(b.Headers) != 1 || b.Headers[0].Key != "a" {
			t.Fatalf("back: key %q (nil %v) topic %q headers %v; want key %q topic %q and header a", b.Key, b.Key == nil, b.Topic, b.Headers, c.key, c.topic)
		}
		failed := &kgo.Record{Key: h.Key, Value: h.Value, Headers: h.Headers}
		if o := p.unhop(record.Source{Topic: "hop"}, failed); o != src || !bytes.Equal(failed.Key, c.key) || len(failed.Headers) != 1 {
			t.Fatalf("unhop: input %v key %q headers %v", o, failed.Key, failed.Headers)
		}
	}
}
