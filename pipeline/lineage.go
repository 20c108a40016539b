package pipeline

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// lineage stamps lineage headers without allocating per record: header
// slices and values are carved from chunks that are reused once the
// transaction holding them has ended (every chunk it filled, not only the
// last, so that a steady stream of transactions allocates none). The
// compact form writes the whole value into the byte chunk; the legacy form
// writes only the offset digits there, its topic and partition values
// built once.
type lineage struct {
	legacy bool
	topics map[string][]byte
	parts  [][]byte
	hdrs   []kgo.RecordHeader
	digits []byte
	// The chunks the open transaction filled, and those free for reuse.
	fullHdrs, spareHdrs     [][]kgo.RecordHeader
	fullDigits, spareDigits [][]byte
	// val is the last compact value stamped, "topic/partition/offset" of
	// valTopic, valPart and valOffset, whose prefix ends at valPrefix: a
	// poll's records come in runs of one partition at consecutive offsets,
	// so the next value is most often val with its digits counted up by one.
	val       []byte
	valPrefix int
	valTopic  string
	valPart   int32
	valOffset int64
}

const (
	hdrChunk   = 16 << 10 // headers per chunk
	digitChunk = 64 << 10 // bytes per chunk
)

// newLineage returns a stamper of the compact form, or with legacy of the
// three legacy headers.
func newLineage(legacy bool) *lineage {
	return &lineage{
		legacy: legacy,
		topics: make(map[string][]byte),
		hdrs:   make([]kgo.RecordHeader, 0, hdrChunk),
		digits: make([]byte, 0, digitChunk),
	}
}

// stamp sets r's lineage headers to src, replacing lineage headers that an
// upstream processor left on it and keeping every other header.
func (l *lineage) stamp(r *kgo.Record, src record.Source) {
	need := len(r.Headers) + 1
	if l.legacy {
		need += 2
	}
	if len(l.hdrs)+need > cap(l.hdrs) {
		// Records of this transaction still use the old chunk.
		l.fullHdrs = append(l.fullHdrs, l.hdrs)
		l.hdrs = nextChunk(&l.spareHdrs, max(hdrChunk, need))
	}
	start := len(l.hdrs)
	for _, h := range r.Headers {
		if !record.IsLineageHeader(h.Key) {
			l.hdrs = append(l.hdrs, h)
		}
	}
	if l.legacy {
		l.hdrs = append(l.hdrs,
			kgo.RecordHeader{Key: record.HeaderSourceTopic, Value: l.topic(src.Topic)},
			kgo.RecordHeader{Key: record.HeaderSourcePartition, Value: l.partition(src.Partition)},
			kgo.RecordHeader{Key: record.HeaderSourceOffset, Value: l.offset(src.Offset)},
		)
	} else {
		l.hdrs = append(l.hdrs, kgo.RecordHeader{Key: record.HeaderSource, Value: l.compact(src)})
	}
	r.Headers = l.hdrs[start:len(l.hdrs):len(l.hdrs)]
}

func (l *lineage) topic(t string) []byte {
	b, ok := l.topics[t]
	if !ok {
		b = []byte(t)
		l.topics[t] = b
	}
	return b
}

// maxCachedPartition bounds the partition values built once: a topic
// rarely has more partitions, and the cache must not grow with a huge one.
const maxCachedPartition = 1 << 16

func (l *lineage) partition(p int32) []byte {
	if p < 0 || p >= maxCachedPartition {
		return strconv.AppendInt(nil, int64(p), 10)
	}
	for int(p) >= len(l.parts) {
		l.parts = append(l.parts, strconv.AppendInt(nil, int64(len(l.parts)), 10))
	}
	return l.parts[p]
}

// compact is src's HeaderSource value, carved from the byte chunk.
func (l *lineage) compact(src record.Source) []byte {
	need := len(src.Topic) + 33 // two '/', an int32's 11 characters and an int64's 20 at most
	if len(l.digits)+need > cap(l.digits) {
		l.fullDigits = append(l.fullDigits, l.digits)
		l.digits = nextChunk(&l.spareDigits, max(digitChunk, need))
	}
	switch {
	case l.val == nil || src.Partition != l.valPart || src.Topic != l.valTopic:
		// record.AppendLineage's form, up to the offset.
		l.val = strconv.AppendInt(append(append(l.val[:0], src.Topic...), '/'), int64(src.Partition), 10)
		l.val = append(l.val, '/')
		l.valPrefix = len(l.val)
		l.valTopic, l.valPart = src.Topic, src.Partition
		l.val = strconv.AppendInt(l.val, src.Offset, 10)
	case src.Offset > 0 && l.valOffset >= 0 && src.Offset == l.valOffset+1 && countUp(l.val[l.valPrefix:]):
	default:
		l.val = strconv.AppendInt(l.val[:l.valPrefix], src.Offset, 10)
	}
	l.valOffset = src.Offset
	start := len(l.digits)
	l.digits = append(l.digits, l.val...)
	return l.digits[start:len(l.digits):len(l.digits)]
}

// countUp adds one to d, the decimal digits of a number of at least 0, in
// place, and reports whether it did: not when d is all nines (the sum has
// one more digit), d then being garbage.
func countUp(d []byte) bool {
	for i := len(d) - 1; i >= 0; i-- {
		switch c := d[i]; {
		case c == '9':
			d[i] = '0'
		case c >= '0' && c < '9':
			d[i] = c + 1
			return true
		default:
			return false
		}
	}
	return false
}

func (l *lineage) offset(o int64) []byte {
	if len(l.digits)+20 > cap(l.digits) {
		l.fullDigits = append(l.fullDigits, l.digits)
		l.digits = nextChunk(&l.spareDigits, digitChunk)
	}
	start := len(l.digits)
	l.digits = strconv.AppendInt(l.digits, o, 10)
	return l.digits[start:len(l.digits):len(l.digits)]
}

// nextChunk returns an empty chunk of at least n elements: a spare one,
// or a new one.
func nextChunk[T any](spare *[][]T, n int) []T {
	if k := len(*spare); k > 0 && cap((*spare)[k-1]) >= n {
		c := (*spare)[k-1]
		(*spare)[k-1] = nil
		*spare = (*spare)[:k-1]
		return c[:0]
	}
	return make([]T, 0, n)
}

// reset makes the chunks reusable; call it only after the transaction that
// used them has ended, when no record refers to them any more.
func (l *lineage) reset() {
	l.hdrs = l.hdrs[:0]
	l.digits = l.digits[:0]
	l.spareHdrs = append(l.spareHdrs, l.fullHdrs...)
	clear(l.fullHdrs)
	l.fullHdrs = l.fullHdrs[:0]
	l.spareDigits = append(l.spareDigits, l.fullDigits...)
	clear(l.fullDigits)
	l.fullDigits = l.fullDigits[:0]
}

// Lineage reads an output record's lineage headers back, of either form:
// the input it was made from, and whether they were present and valid.
// Audits of the output (cmd/eoscheck, the tests) read them with
// record.Lineage, which this is.
func Lineage(r *kgo.Record) (record.Source, bool) {
	return record.Lineage(r.Headers)
}
