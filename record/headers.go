package record

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Lineage header keys: where an output record's input came from. The
// processor stamps them on every output record and dead letter; anyone can
// audit output against input with them (cmd/eoscheck does). They are part
// of the processor's public interface.
const (
	HeaderSourceTopic     = "processor.source.topic"
	HeaderSourcePartition = "processor.source.partition" // ASCII decimal
	HeaderSourceOffset    = "processor.source.offset"    // ASCII decimal
)

// Dead-letter header keys, added to a dead letter's original headers
// beside the lineage headers. They are part of the processor's public
// interface.
const (
	HeaderError             = "processor.error"               // the error message
	HeaderErrorTransform    = "processor.error.transform"     // the chain entry that failed; "produce" when the output could not be written
	HeaderErrorAttempts     = "processor.error.attempts"      // how many times the chain ran on the record, ASCII decimal
	HeaderErrorValueDropped = "processor.error.value.dropped" // set when the value was dropped because the dead letter itself could not be written; says why
)

// IsLineageHeader reports whether key is one of the lineage header keys,
// which a processor replaces rather than keeps when it stamps a record.
func IsLineageHeader(key string) bool {
	switch key {
	case HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset:
		return true
	}
	return false
}

// IsDeadLetterHeader reports whether key is one of the dead-letter header
// keys, which a processor replaces when a replayed dead letter fails again.
func IsDeadLetterHeader(key string) bool {
	switch key {
	case HeaderError, HeaderErrorTransform, HeaderErrorAttempts, HeaderErrorValueDropped:
		return true
	}
	return false
}

// LineageHeaders returns the three lineage headers of src, in the order
// the processor writes them: topic, partition, offset. The processor's
// loop stamps the same bytes without allocating per record; this is the
// plain form, for tools and tests.
func LineageHeaders(src Source) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: HeaderSourceTopic, Value: []byte(src.Topic)},
		{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(src.Partition), 10)},
		{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, src.Offset, 10)},
	}
}

// Lineage reads lineage headers back: the input a record was made from,
// and whether all three headers were present and valid (a non-empty topic,
// a partition and an offset that are non-negative decimals). When a key
// appears more than once, the last one counts. On false the Source is
// zero.
func Lineage(headers []kgo.RecordHeader) (Source, bool) {
	var topic, part, off string
	var has [3]bool
	for _, h := range headers {
		switch h.Key {
		case HeaderSourceTopic:
			topic, has[0] = string(h.Value), true
		case HeaderSourcePartition:
			part, has[1] = string(h.Value), true
		case HeaderSourceOffset:
			off, has[2] = string(h.Value), true
		}
	}
	p, err1 := strconv.ParseInt(part, 10, 32)
	o, err2 := strconv.ParseInt(off, 10, 64)
	if !has[0] || !has[1] || !has[2] || topic == "" || err1 != nil || err2 != nil || p < 0 || o < 0 {
		return Source{}, false
	}
	return Source{Topic: topic, Partition: int32(p), Offset: o}, true
}
