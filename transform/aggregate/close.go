package aggregate

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/groupkey"
)

// EMIT=close: a window's entry holds its aggregate and, after a space,
// the offset of the last input counted into it (stored). Nothing is
// emitted per input; when the partition's stream time reaches the
// window's end plus GRACE (the entry's expiry), the processor deletes
// the entry and, in the same transaction, writes what Closed makes of
// it: the window's one final output, the same key and value as
// EMIT=update's last output for the window, stamped with the window's
// last millisecond, and the lineage of that last input. An entry written
// with EMIT=update has no offset (its final output names none), and one
// written with EMIT=close reads back under EMIT=update (aggOf): the
// setting may change between runs.

// EmitsOnClose implements transform.WindowEmitter: with EMIT=close.
func (t *Transform) EmitsOnClose(store string) bool { return t.close && store == t.store }

// Closed implements transform.WindowEmitter: the final output of the
// window whose entry closed.
func (t *Transform) Closed(_ context.Context, c transform.Closing, out []*kgo.Record) ([]*kgo.Record, int64, error) {
	k, start, err := groupkey.ParseWindow(c.Key)
	if err != nil {
		return out, -1, fmt.Errorf("aggregate: a closed window: %w", err)
	}
	agg, offset := c.Value, int64(-1)
	if i := bytes.IndexByte(c.Value, ' '); i >= 0 {
		agg = c.Value[:i]
		if offset, err = strconv.ParseInt(string(c.Value[i+1:]), 10, 64); err != nil {
			return out, -1, fmt.Errorf("aggregate: the stored window %q: %w", c.Value, err)
		}
	}
	end := start + t.window
	return append(out, &kgo.Record{
		Key:       windowKey(k.Out, start),
		Value:     encode(k.JSON, string(agg), time.UnixMilli(start), time.UnixMilli(end)),
		Timestamp: time.UnixMilli(end - 1),
	}), offset, nil
}

// stored is the entry of an aggregate: agg, and with EMIT=close and a
// known input offset a space and the offset.
func (t *Transform) stored(agg string, offset int64) []byte {
	if !t.close || offset < 0 {
		return []byte(agg)
	}
	return strconv.AppendInt(append([]byte(agg), ' '), offset, 10)
}

// aggOf is the aggregate of a stored entry (stored), without the offset.
func aggOf(stored []byte) []byte {
	if i := bytes.IndexByte(stored, ' '); i >= 0 {
		return stored[:i]
	}
	return stored
}
