package record

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicPartition and Source print and convert as logs and reports show
// them.
func TestTopicPartitionAndSource(t *testing.T) {
	src := Source{Topic: "orders", Partition: 3, Offset: 42}
	if got := src.TopicPartition(); got != (TopicPartition{Topic: "orders", Partition: 3}) {
		t.Errorf("TopicPartition() = %v", got)
	}
	if got := src.TopicPartition().String(); got != "orders/3" {
		t.Errorf("String() = %q, want orders/3", got)
	}
}

// The lineage headers encode a source as the processor writes it, and
// Lineage reads back exactly that, for any position, with other headers
// around them.
func TestLineageRoundTrip(t *testing.T) {
	for _, src := range []Source{{Topic: "in", Partition: 3, Offset: 42}, {Topic: "a.b-c_d", Partition: 0, Offset: 0},
		{Topic: "t", Partition: math.MaxInt32, Offset: math.MaxInt64}} {
		hs := LineageHeaders(src)
		if len(hs) != 3 || hs[0].Key != HeaderSourceTopic || hs[1].Key != HeaderSourcePartition || hs[2].Key != HeaderSourceOffset {
			t.Fatalf("LineageHeaders(%v) = %v, want topic, partition and offset in that order", src, hs)
		}
		if got := string(hs[2].Value); got != strconv.FormatInt(src.Offset, 10) {
			t.Errorf("offset header %q, want ASCII decimal %d", got, src.Offset)
		}
		around := append([]kgo.RecordHeader{{Key: "before", Value: []byte("x")}}, hs...)
		around = append(around, kgo.RecordHeader{Key: "after", Value: []byte("y")})
		if got, ok := Lineage(around); !ok || got != src {
			t.Errorf("Lineage(LineageHeaders(%v)) = %v, %v", src, got, ok)
		}
	}
}

// Lineage refuses headers that are missing, empty or not non-negative
// decimals, and returns the zero Source then.
func TestLineageRefusesBadHeaders(t *testing.T) {
	h := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	topic, part, off := h(HeaderSourceTopic, "in"), h(HeaderSourcePartition, "3"), h(HeaderSourceOffset, "42")
	for name, hs := range map[string][]kgo.RecordHeader{
		"none":                 nil,
		"no topic":             {part, off},
		"no partition":         {topic, off},
		"no offset":            {topic, part},
		"empty topic":          {h(HeaderSourceTopic, ""), part, off},
		"bad partition":        {topic, h(HeaderSourcePartition, "x"), off},
		"partition over int32": {topic, h(HeaderSourcePartition, "2147483648"), off},
		"negative partition":   {topic, h(HeaderSourcePartition, "-1"), off},
		"bad offset":           {topic, part, h(HeaderSourceOffset, "4.2")},
		"negative offset":      {topic, part, h(HeaderSourceOffset, "-1")},
	} {
		if got, ok := Lineage(hs); ok || got != (Source{}) {
			t.Errorf("%s: Lineage = %v, %v; want nothing", name, got, ok)
		}
	}
	// The last of a repeated key counts.
	if got, ok := Lineage([]kgo.RecordHeader{topic, part, off, h(HeaderSourceOffset, "7")}); !ok || got.Offset != 7 {
		t.Errorf("repeated offset: Lineage = %v, %v; want offset 7", got, ok)
	}
}

// The header names are the public interface, spelled as documented, and
// each belongs to exactly one family.
func TestHeaderNames(t *testing.T) {
	lineage := []string{"processor.source.topic", "processor.source.partition", "processor.source.offset"}
	dead := []string{"processor.error", "processor.error.transform", "processor.error.attempts", "processor.error.value.dropped"}
	if got := []string{HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset}; strings.Join(got, " ") != strings.Join(lineage, " ") {
		t.Errorf("lineage headers %v, want %v", got, lineage)
	}
	if got := []string{HeaderError, HeaderErrorTransform, HeaderErrorAttempts, HeaderErrorValueDropped}; strings.Join(got, " ") != strings.Join(dead, " ") {
		t.Errorf("dead-letter headers %v, want %v", got, dead)
	}
	for _, k := range lineage {
		if !IsLineageHeader(k) || IsDeadLetterHeader(k) {
			t.Errorf("%s: IsLineageHeader %v, IsDeadLetterHeader %v", k, IsLineageHeader(k), IsDeadLetterHeader(k))
		}
	}
	for _, k := range dead {
		if IsLineageHeader(k) || !IsDeadLetterHeader(k) {
			t.Errorf("%s: IsLineageHeader %v, IsDeadLetterHeader %v", k, IsLineageHeader(k), IsDeadLetterHeader(k))
		}
	}
	if IsLineageHeader("processor.source") || IsDeadLetterHeader("other") {
		t.Error("a key of neither family is taken for one")
	}
}
