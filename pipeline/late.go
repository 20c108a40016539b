package pipeline

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// Late records (transform.Late): a stateful stage that finds a record
// late hands it to its worker's holder, which notes the store for
// processor_records_late_total{store} (counted once the transaction
// commits, and only for records that succeed) and, with
// Options.LateTopic, routes the record there with the processor.late.*
// headers: the stage emits it, and the loop produces it inside the
// transaction like any routed output.

// Late implements transform.LateHandler for the record the worker runs.
func (h *storeHolder) Late(rec *kgo.Record, info transform.LateInfo) bool {
	if !slices.Contains(h.lates, info.Store) { // a retry of the record finds it late again
		h.lates = append(h.lates, info.Store)
	}
	if h.lateTopic == "" {
		return false
	}
	rec.Topic = h.lateTopic
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: record.HeaderLateStore, Value: []byte(info.Store)},
		kgo.RecordHeader{Key: record.HeaderLateBy, Value: strconv.AppendInt(nil, info.By, 10)},
		kgo.RecordHeader{Key: record.HeaderLateStreamTime, Value: strconv.AppendInt(nil, info.StreamTime, 10)})
	if info.Windowed {
		rec.Headers = append(rec.Headers,
			kgo.RecordHeader{Key: record.HeaderLateWindowStart, Value: strconv.AppendInt(nil, info.WindowStart, 10)},
			kgo.RecordHeader{Key: record.HeaderLateWindowEnd, Value: strconv.AppendInt(nil, info.WindowEnd, 10)})
	}
	return true
}

// takeLates returns the stores that found the record just run late, for
// its result (nil, allocating nothing, when none did), and forgets them.
func (h *storeHolder) takeLates(err error) []string {
	if len(h.lates) == 0 {
		return nil
	}
	var out []string
	if err == nil {
		out = slices.Clone(h.lates)
	}
	h.lates = h.lates[:0]
	return out
}

// countLate counts the late records of a record that succeeded, in the
// open transaction.
func (c *txnCounts) countLate(stores []string) {
	for _, s := range stores {
		if c.late == nil {
			c.late = map[string]int{}
		}
		c.late[s]++
	}
}
