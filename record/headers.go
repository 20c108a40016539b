package record

import (
	"bytes"
	"math"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Lineage header keys: where an output record's input came from. The
// processor stamps them on every output record and dead letter; anyone can
// audit output against input with them (cmd/eoscheck does). They are part
// of the processor's public interface.
//
// HeaderSource is the compact form the processor writes by default: one
// header whose value is the input's topic, partition and offset as text,
// "topic/partition/offset" (e.g. "orders/3/12345", partition and offset
// ASCII decimal; a topic name cannot hold a '/'). The three
// HeaderSourceTopic, HeaderSourcePartition and HeaderSourceOffset are the
// legacy form (PROCESSOR_LINEAGE_HEADERS=legacy), one value each. Lineage
// reads either.
const (
	HeaderSource          = "processor.source"           // topic/partition/offset
	HeaderSourceTopic     = "processor.source.topic"     // legacy form
	HeaderSourcePartition = "processor.source.partition" // legacy form, ASCII decimal
	HeaderSourceOffset    = "processor.source.offset"    // legacy form, ASCII decimal
)

// Dead-letter header keys, added to a dead letter's original headers
// beside the lineage headers. They are part of the processor's public
// interface.
const (
	HeaderError             = "processor.error"               // the error message
	HeaderErrorTransform    = "processor.error.transform"     // the chain entry that failed; "produce" when the output could not be written
	HeaderErrorAttempts     = "processor.error.attempts"      // how many times the chain ran on the record, ASCII decimal
	HeaderErrorValueDropped = "processor.error.value.dropped" // set when the value was dropped because the dead letter itself could not be written; says why
	HeaderErrorReplays      = "processor.error.replays"       // how many times `processor replay` ran the record again and it failed again, ASCII decimal; absent before the first replay
	HeaderErrorSchemaID     = "processor.error.schema.id"     // the Schema Registry schema id the key or value that failed to decode names (unknown to the registry, or its payload does not fit), ASCII decimal
)

// SchemaIDError is an error that names the Schema Registry schema id of
// the record it failed (its key's or value's header names an id the
// registry does not have, or its payload does not decode with that id's
// schema). The dead letter of a record failed with one (anywhere in the
// error's chain) carries the id in HeaderErrorSchemaID, so that an
// operator finds every record of a deleted or never registered schema by
// a header, not by parsing the message.
type SchemaIDError interface {
	error
	// SchemaID returns the id the record names.
	SchemaID() int
}

// IsLineageHeader reports whether key is one of the lineage header keys,
// of either form, which a processor replaces rather than keeps when it
// stamps a record.
func IsLineageHeader(key string) bool {
	switch key {
	case HeaderSource, HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset:
		return true
	}
	return false
}

// IsDeadLetterHeader reports whether key is one of the dead-letter header
// keys, which a processor replaces when a replayed dead letter fails again.
func IsDeadLetterHeader(key string) bool {
	switch key {
	case HeaderError, HeaderErrorTransform, HeaderErrorAttempts, HeaderErrorValueDropped, HeaderErrorSchemaID, HeaderErrorReplays:
		return true
	}
	return false
}

// AppendLineage appends the value of src's HeaderSource header to b,
// "topic/partition/offset", and returns the extended slice. It allocates
// nothing when b has room for it (len(src.Topic) + 22 bytes at most).
func AppendLineage(b []byte, src Source) []byte {
	b = append(b, src.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(src.Partition), 10)
	b = append(b, '/')
	return strconv.AppendInt(b, src.Offset, 10)
}

// LineageHeaders returns src's lineage header in the compact form the
// processor writes by default: HeaderSource alone. The processor's loop
// stamps the same bytes without allocating per record; this is the plain
// form, for tools and tests.
func LineageHeaders(src Source) []kgo.RecordHeader {
	return []kgo.RecordHeader{{Key: HeaderSource, Value: AppendLineage(nil, src)}}
}

// LegacyLineageHeaders returns src's three lineage headers of the legacy
// form, in the order the processor writes them (with
// PROCESSOR_LINEAGE_HEADERS=legacy): topic, partition, offset.
func LegacyLineageHeaders(src Source) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: HeaderSourceTopic, Value: []byte(src.Topic)},
		{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(src.Partition), 10)},
		{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, src.Offset, 10)},
	}
}

// Lineage reads lineage headers back, of either form: the input a record
// was made from, and whether its lineage was present and valid. The
// compact HeaderSource is valid when its value is a non-empty topic, a
// partition and an offset, separated by '/', the two numbers
// non-negative ASCII decimals without sign or leading zeros. The legacy
// form is valid when all three headers are present, with a non-empty
// topic and a partition and an offset that are non-negative decimals.
// When a key appears more than once, the last one counts. A record
// carrying both forms (the processor never writes both) is valid only
// when each is and they name the same input, so that an auditor never
// has to choose. On false the Source is zero.
func Lineage(headers []kgo.RecordHeader) (Source, bool) {
	var compact []byte
	var topic, part, off string
	var hasCompact bool
	var has [3]bool
	for _, h := range headers {
		switch h.Key {
		case HeaderSource:
			compact, hasCompact = h.Value, true
		case HeaderSourceTopic:
			topic, has[0] = string(h.Value), true
		case HeaderSourcePartition:
			part, has[1] = string(h.Value), true
		case HeaderSourceOffset:
			off, has[2] = string(h.Value), true
		}
	}
	hasLegacy := has[0] || has[1] || has[2]
	var c, l Source
	cok, lok := false, false
	if hasCompact {
		c, cok = parseCompact(compact)
	}
	if hasLegacy {
		l, lok = parseLegacy(topic, part, off, has)
	}
	switch {
	case hasCompact && hasLegacy && (!cok || !lok || c != l):
		return Source{}, false
	case hasCompact:
		return c, cok
	case lok:
		return l, true
	}
	return Source{}, false
}

// parseLegacy reads the three legacy lineage headers' values.
func parseLegacy(topic, part, off string, has [3]bool) (Source, bool) {
	p, err1 := strconv.ParseInt(part, 10, 32)
	o, err2 := strconv.ParseInt(off, 10, 64)
	if !has[0] || !has[1] || !has[2] || topic == "" || err1 != nil || err2 != nil || p < 0 || o < 0 {
		return Source{}, false
	}
	return Source{Topic: topic, Partition: int32(p), Offset: o}, true
}

// parseCompact reads a HeaderSource value, "topic/partition/offset".
func parseCompact(v []byte) (Source, bool) {
	i := bytes.IndexByte(v, '/')
	if i <= 0 {
		return Source{}, false
	}
	rest := v[i+1:]
	j := bytes.IndexByte(rest, '/')
	if j < 0 {
		return Source{}, false
	}
	p, ok1 := decimal(rest[:j], math.MaxInt32)
	o, ok2 := decimal(rest[j+1:], math.MaxInt64)
	if !ok1 || !ok2 {
		return Source{}, false
	}
	return Source{Topic: string(v[:i]), Partition: int32(p), Offset: o}, true
}

// decimal reads b as a non-negative ASCII decimal of at most limit, in
// its one canonical spelling: digits only, no sign, no leading zero (but
// for 0 itself).
func decimal(b []byte, limit int64) (int64, bool) {
	if len(b) == 0 || len(b) > 19 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0') // 19 digits fit a uint64
	}
	if n > uint64(limit) {
		return 0, false
	}
	return int64(n), true
}
