package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// deadLetter writes the input record as it arrived, with the error headers
// and lineage, to the dead-letter topic in the open transaction.
// dropValue, when set, drops the value and says why.
func (p *Pipeline) deadLetter(src record.Source, r *kgo.Record, stage string, attempts int, err error, dropValue string) {
	lin := src
	replays := 0
	switch {
	case p.fromHop(src.Topic): // as it was before the hop, naming its input
		lin = p.unhop(src, r)
	case p.o.Replay: // naming the input it was first a dead letter of
		lin, replays = replayOrigin(src, r), replayCount(r.Headers)+1
	}
	r.Headers = deadLetterHeaders(r.Headers, stage, attempts, err, dropValue)
	if replays > 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: record.HeaderErrorReplays, Value: strconv.AppendInt(nil, int64(replays), 10)})
	}
	if dropValue != "" {
		r.Value = nil
	}
	r.Topic = p.o.DLQTopic
	p.open.dlqLineage.stamp(r, lin)
	if dropValue == "" {
		p.fitDeadLetter(r)
	}
	p.open.counts.dlq++
	if p.o.MaxTxnBytes > 0 {
		p.open.counts.bytes += transform.Bytes(r) // held as rows until the end with a database sink
	}
	p.open.sent.noteDead(r, src, failure{stage: stage, attempts: attempts, err: err})
	p.s.ProduceDeadLetter(p.work, r, src, txn.DeadLetter{Stage: stage, Attempts: attempts, Err: err})
}

// minErrorQuote is the least of the error message a dead letter keeps
// when its headers are clipped to make it fit its topic.
const minErrorQuote = 64

// fitDeadLetter makes the dead letter r fit the producer's limit for the
// dead-letter topic (its max.message.bytes) when it is over it: first by
// clipping the processor.error header, down to minErrorQuote bytes; when
// that is not enough, by dropping the value, saying so in
// processor.error.value.dropped. A dead letter that does not fit even so
// fails to produce, and the policy's last resort applies (see
// poisonInput). The input itself fitted its own topic's limit, so with
// limits alike only the headers the processor adds can push it over.
func (p *Pipeline) fitDeadLetter(r *kgo.Record) {
	limit := p.s.MaxRecordBytes(r.Topic)
	over := wireBytes(r) - limit
	if limit <= 0 || over <= 0 {
		return
	}
	for i := range r.Headers {
		h := &r.Headers[i]
		if h.Key != record.HeaderError {
			continue
		}
		if keep := len(h.Value) - over; keep >= minErrorQuote {
			h.Value = []byte(record.ClipWithin(string(h.Value), keep))
			return
		}
		h.Value = []byte(record.ClipWithin(string(h.Value), minErrorQuote))
	}
	size := wireBytes(r)
	r.Value = nil
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: record.HeaderErrorValueDropped, Value: []byte(fmt.Sprintf(
		"the dead letter with its value (%d bytes encoded) is larger than the %d bytes the dead-letter topic takes (max.message.bytes)", size, limit))})
}

// wireBytes is what r takes encoded alone in a record batch (Kafka's
// format v2), batch header included, as the producer counts it against
// its limit before compression; the broker measures the same batch
// (4 bytes less) against max.message.bytes.
func wireBytes(r *kgo.Record) int {
	const batch = 65 // the batch header as franz-go counts it
	body := 3 +      // attributes; timestamp and offset deltas, 0 for a batch's first record
		varintLen(len(r.Key)) + len(r.Key) + varintLen(len(r.Value)) + len(r.Value) + varintLen(len(r.Headers))
	for _, h := range r.Headers {
		body += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return batch + varintLen(body) + body
}

// varintLen is the length of n as a zigzag varint.
func varintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], int64(n))
}

// deadLetterHeaders returns a new header slice: the original headers
// (without error headers of an earlier dead-lettering, as when a replayed
// dead letter fails again) plus the error headers, with
// processor.error.schema.id when err names the schema id of a key or
// value that failed to decode (record.SchemaIDError).
func deadLetterHeaders(orig []kgo.RecordHeader, stage string, attempts int, err error, dropValue string) []kgo.RecordHeader {
	hdrs := make([]kgo.RecordHeader, 0, len(orig)+5)
	for _, h := range orig {
		if !record.IsDeadLetterHeader(h.Key) {
			hdrs = append(hdrs, h)
		}
	}
	hdrs = append(hdrs,
		kgo.RecordHeader{Key: record.HeaderError, Value: []byte(err.Error())},
		kgo.RecordHeader{Key: record.HeaderErrorTransform, Value: []byte(stage)},
		kgo.RecordHeader{Key: record.HeaderErrorAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
	)
	var idErr record.SchemaIDError
	if errors.As(err, &idErr) {
		hdrs = append(hdrs, kgo.RecordHeader{Key: record.HeaderErrorSchemaID, Value: strconv.AppendInt(nil, int64(idErr.SchemaID()), 10)})
	}
	if dropValue != "" {
		hdrs = append(hdrs, kgo.RecordHeader{Key: record.HeaderErrorValueDropped, Value: []byte(dropValue)})
	}
	return hdrs
}

// replayOrigin returns the input a replayed dead letter r was made from,
// by its lineage headers (either form), or src when it has none.
func replayOrigin(src record.Source, r *kgo.Record) record.Source {
	if o, ok := record.Lineage(r.Headers); ok {
		return o
	}
	return src
}

// replayCount reads processor.error.replays: how many replays a dead
// letter has failed already (0 when absent or not a number).
func replayCount(hs []kgo.RecordHeader) int {
	n := 0
	for _, h := range hs {
		if h.Key == record.HeaderErrorReplays {
			if v, err := strconv.Atoi(string(h.Value)); err == nil && v > 0 {
				n = v
			}
		}
	}
	return n
}
