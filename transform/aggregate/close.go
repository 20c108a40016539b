package aggregate

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/groupkey"
)

// EMIT=close: a window's entry holds its aggregate and, after a space,
// the input counted into it last (stored): its offset and, behind a
// repartition hop, its partition and topic, each after a space. That
// input is the original one (transform.OriginOf): behind a hop the
// record the stage ran was the repartition topic's, and the window's
// final row names the input that record was made from, as every output
// across the hop does; without a hop the input is of the entry's own
// topic and partition, and the offset alone names it, as in earlier
// releases. Nothing is emitted per input; when the partition's stream
// time reaches the window's end plus GRACE (the entry's expiry), the
// processor deletes the entry and, in the same transaction, writes what
// Closed makes of it: the window's one final output, the same key and
// value as EMIT=update's last output for the window, stamped with the
// window's last millisecond, and the lineage of that last input. An
// entry written with EMIT=update has no offset (its final output names
// none), and one written with EMIT=close reads back under EMIT=update
// (aggOf): the setting may change between runs.

// EmitsOnClose implements transform.WindowEmitter: with EMIT=close.
func (t *Transform) EmitsOnClose(store string) bool { return t.close && store == t.store }

// Closed implements transform.WindowEmitter: the final output of the
// window whose entry closed.
func (t *Transform) Closed(_ context.Context, c transform.Closing, out []*kgo.Record) ([]*kgo.Record, record.Source, error) {
	from := record.Source{Topic: c.Topic, Partition: c.Partition, Offset: -1}
	k, start, err := groupkey.ParseWindow(c.Key)
	if err != nil {
		return out, from, fmt.Errorf("aggregate: a closed window: %w", err)
	}
	agg, from, err := lastInput(c.Value, from)
	if err != nil {
		return out, from, fmt.Errorf("aggregate: the stored window %q: %w", c.Value, err)
	}
	end := start + t.window
	return append(out, &kgo.Record{
		Key:       windowKey(k.Out, start),
		Value:     encode(k.JSON, agg, time.UnixMilli(start), time.UnixMilli(end)),
		Timestamp: time.UnixMilli(end - 1),
	}), from, nil
}

// lastInput splits a stored entry (stored) into its aggregate and the
// input counted into it last; an entry without one keeps entry's Topic
// and Partition and an Offset of -1, one with only an offset entry's
// Topic and Partition.
func lastInput(v []byte, entry record.Source) ([]byte, record.Source, error) {
	agg, rest, ok := bytes.Cut(v, []byte{' '})
	if !ok {
		return agg, entry, nil
	}
	off, rest, more := bytes.Cut(rest, []byte{' '})
	offset, err := strconv.ParseInt(string(off), 10, 64)
	if err != nil {
		return agg, entry, err
	}
	entry.Offset = offset
	if !more {
		return agg, entry, nil
	}
	part, topic, ok := bytes.Cut(rest, []byte{' '})
	p, err := strconv.ParseInt(string(part), 10, 32)
	if err != nil || !ok || len(topic) == 0 {
		return agg, entry, fmt.Errorf("want <aggregate> <offset> <partition> <topic>")
	}
	entry.Topic, entry.Partition = string(topic), int32(p)
	return agg, entry, nil
}

// stored is the entry of an aggregate: agg, extended in place, and with EMIT=close and a
// known input the input's offset and, unless from.Topic is empty (the
// input is of the entry's own topic and partition, as without a
// repartition hop), its partition and topic, each after a space.
func (t *Transform) stored(agg []byte, from record.Source) []byte {
	if !t.close || from.Offset < 0 {
		return agg
	}
	b := strconv.AppendInt(append(agg, ' '), from.Offset, 10)
	if from.Topic == "" {
		return b
	}
	b = strconv.AppendInt(append(b, ' '), int64(from.Partition), 10)
	return append(append(b, ' '), from.Topic...)
}

// aggOf is the aggregate of a stored entry (stored), without the input.
func aggOf(stored []byte) []byte {
	if i := bytes.IndexByte(stored, ' '); i >= 0 {
		return stored[:i]
	}
	return stored
}
