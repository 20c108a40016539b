package pipeline

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Lineage reads back exactly what stamp wrote, in either form, for any
// position, and refuses headers that are missing, empty or not
// non-negative decimals.
func TestLineageDecodesStamp(t *testing.T) {
	compact, l := newLineage(false), newLineage(true)
	for _, src := range []record.Source{{Topic: "in", Partition: 3, Offset: 42}, {Topic: "a.b-c_d", Partition: 0, Offset: 0},
		{Topic: "t", Partition: maxCachedPartition - 1, Offset: 1}, {Topic: "t", Partition: maxCachedPartition, Offset: 2},
		{Topic: "t", Partition: 1<<31 - 1, Offset: 1<<63 - 1}} {
		for _, st := range []*lineage{compact, l} {
			r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "other", Value: []byte("x")}}}
			st.stamp(r, src)
			if got, ok := Lineage(r); !ok || got != src {
				t.Errorf("Lineage(stamp(%v)), legacy %v = %v, %v", src, st.legacy, got, ok)
			}
		}
	}
	if len(l.parts) > maxCachedPartition {
		t.Errorf("%d partition values cached, want at most %d", len(l.parts), maxCachedPartition)
	}
	h := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	topic, part, off := h(record.HeaderSourceTopic, "in"), h(record.HeaderSourcePartition, "3"), h(record.HeaderSourceOffset, "42")
	for name, hs := range map[string][]kgo.RecordHeader{
		"none":                 nil,
		"no topic":             {part, off},
		"no partition":         {topic, off},
		"no offset":            {topic, part},
		"empty topic":          {h(record.HeaderSourceTopic, ""), part, off},
		"bad partition":        {topic, h(record.HeaderSourcePartition, "x"), off},
		"partition over int32": {topic, h(record.HeaderSourcePartition, "2147483648"), off},
		"negative partition":   {topic, h(record.HeaderSourcePartition, "-1"), off},
		"bad offset":           {topic, part, h(record.HeaderSourceOffset, "4.2")},
		"negative offset":      {topic, part, h(record.HeaderSourceOffset, "-1")},
	} {
		if got, ok := Lineage(&kgo.Record{Headers: hs}); ok || got != (record.Source{}) {
			t.Errorf("%s: Lineage = %v, %v; want nothing", name, got, ok)
		}
	}
}
