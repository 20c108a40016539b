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

var lineageSources = []Source{{Topic: "in", Partition: 3, Offset: 42}, {Topic: "a.b-c_d", Partition: 0, Offset: 0},
	{Topic: "t", Partition: math.MaxInt32, Offset: math.MaxInt64}, {Topic: "orders", Partition: 3, Offset: 10_000_000}}

// The compact lineage header encodes a source as the processor writes it,
// topic/partition/offset, and Lineage reads back exactly that, for any
// position, with other headers around it.
func TestLineageRoundTrip(t *testing.T) {
	for _, src := range lineageSources {
		hs := LineageHeaders(src)
		want := src.Topic + "/" + strconv.Itoa(int(src.Partition)) + "/" + strconv.FormatInt(src.Offset, 10)
		if len(hs) != 1 || hs[0].Key != HeaderSource || string(hs[0].Value) != want {
			t.Fatalf("LineageHeaders(%v) = %v, want %s: %q", src, hs, HeaderSource, want)
		}
		around := append([]kgo.RecordHeader{{Key: "before", Value: []byte("x")}}, hs...)
		around = append(around, kgo.RecordHeader{Key: "after", Value: []byte("y")})
		if got, ok := Lineage(around); !ok || got != src {
			t.Errorf("Lineage(LineageHeaders(%v)) = %v, %v", src, got, ok)
		}
	}
}

// The legacy form's three headers read back the same way.
func TestLegacyLineageRoundTrip(t *testing.T) {
	for _, src := range lineageSources {
		hs := LegacyLineageHeaders(src)
		if len(hs) != 3 || hs[0].Key != HeaderSourceTopic || hs[1].Key != HeaderSourcePartition || hs[2].Key != HeaderSourceOffset {
			t.Fatalf("LegacyLineageHeaders(%v) = %v, want topic, partition and offset in that order", src, hs)
		}
		if got := string(hs[2].Value); got != strconv.FormatInt(src.Offset, 10) {
			t.Errorf("offset header %q, want ASCII decimal %d", got, src.Offset)
		}
		around := append([]kgo.RecordHeader{{Key: "before", Value: []byte("x")}}, hs...)
		around = append(around, kgo.RecordHeader{Key: "after", Value: []byte("y")})
		if got, ok := Lineage(around); !ok || got != src {
			t.Errorf("Lineage(LegacyLineageHeaders(%v)) = %v, %v", src, got, ok)
		}
	}
}

// AppendLineage allocates nothing when the slice has room.
func TestAppendLineageDoesNotAllocate(t *testing.T) {
	b := make([]byte, 0, 64)
	src := Source{Topic: "orders", Partition: 3, Offset: 10_000_000}
	if n := testing.AllocsPerRun(100, func() { b = AppendLineage(b[:0], src) }); n != 0 {
		t.Errorf("AppendLineage allocates %.1f times, want 0", n)
	}
}

// Lineage refuses legacy headers that are missing, empty or not
// non-negative decimals, and returns the zero Source then.
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

// Lineage refuses a compact value that is not exactly a non-empty topic,
// a partition and an offset in canonical decimal, separated by '/'.
func TestLineageRefusesBadCompactHeader(t *testing.T) {
	for _, v := range []string{"", "in", "in/3", "/3/42", "in//42", "in/3/", "in/3/42/", "in/3/42/7", "a/b/3/42",
		"in/x/42", "in/3/4.2", "in/-1/42", "in/3/-1", "in/+3/42", "in/3/+42", "in/03/42", "in/3/042", "in/3/ 42",
		"in/2147483648/42", "in/3/9223372036854775808", "in/3/99999999999999999999", "in/3/18446744073709551616", "in/3/9999999999999999999"} {
		if got, ok := Lineage([]kgo.RecordHeader{{Key: HeaderSource, Value: []byte(v)}}); ok || got != (Source{}) {
			t.Errorf("%q: Lineage = %v, %v; want nothing", v, got, ok)
		}
	}
	ok := []kgo.RecordHeader{{Key: HeaderSource, Value: []byte("bad")}, {Key: HeaderSource, Value: []byte("in/0/0")}}
	if got, valid := Lineage(ok); !valid || got != (Source{Topic: "in"}) {
		t.Errorf("repeated header: Lineage = %v, %v; want the last, in/0/0", got, valid)
	}
}

// Both forms on one record count only when each is valid and they agree:
// an auditor is never left to choose between two inputs.
func TestLineageBothForms(t *testing.T) {
	src := Source{Topic: "in", Partition: 3, Offset: 42}
	both := append(LegacyLineageHeaders(src), LineageHeaders(src)...)
	if got, ok := Lineage(both); !ok || got != src {
		t.Errorf("agreeing forms: Lineage = %v, %v; want %v", got, ok, src)
	}
	for name, hs := range map[string][]kgo.RecordHeader{
		"disagree":       append(LegacyLineageHeaders(src), LineageHeaders(Source{Topic: "in", Partition: 3, Offset: 43})...),
		"bad compact":    append(LegacyLineageHeaders(src), kgo.RecordHeader{Key: HeaderSource, Value: []byte("in/3")}),
		"partial legacy": append(LineageHeaders(src), LegacyLineageHeaders(src)[0]),
	} {
		if got, ok := Lineage(hs); ok || got != (Source{}) {
			t.Errorf("%s: Lineage = %v, %v; want nothing", name, got, ok)
		}
	}
}

// The header names are the public interface, spelled as documented, and
// each belongs to exactly one family.
func TestHeaderNames(t *testing.T) {
	lineage := []string{"processor.source", "processor.source.topic", "processor.source.partition", "processor.source.offset"}
	dead := []string{"processor.error", "processor.error.transform", "processor.error.attempts", "processor.error.value.dropped", "processor.error.schema.id"}
	if got := []string{HeaderSource, HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset}; strings.Join(got, " ") != strings.Join(lineage, " ") {
		t.Errorf("lineage headers %v, want %v", got, lineage)
	}
	if got := []string{HeaderError, HeaderErrorTransform, HeaderErrorAttempts, HeaderErrorValueDropped, HeaderErrorSchemaID}; strings.Join(got, " ") != strings.Join(dead, " ") {
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
	if IsLineageHeader("processor.sources") || IsLineageHeader("processor.source.") || IsDeadLetterHeader("other") {
		t.Error("a key of neither family is taken for one")
	}
}
