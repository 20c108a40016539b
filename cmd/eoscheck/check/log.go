package check

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// How the reader reads one partition's log: every record, control records
// too, with the lineage, error header and mark of each data record, and
// the outcome of each record's transaction from the markers that follow.

// rec is what the reader keeps of a record.
type rec struct {
	offset   int64
	pid      int64
	txnal    bool
	control  bool
	marker   bool   // control: a commit or abort marker
	abort    bool   // control: an abort marker
	src      Input  // data: lineage; Topic empty when missing
	err      string // data: the processor.error header, truncated
	mark     Mark   // data, with Source.Poison: MarkOf its key and value
	key      string // data: its key; keyed false for a null key
	keyed    bool
	count    int64 // data of an output topic, with Source.Aggregate: ParseAggregate of its value
	countOK  bool
	countKey []byte
	ts       int64  // data: its timestamp, Unix milliseconds
	group    string // data of an input topic, with Source.GroupBy: its value's group key
	grouped  bool
	row      json.RawMessage // data of an output topic, with Source.Join: the value at Source.JoinInto
	value    []byte          // data of the join's table topic: the value (nil for a tombstone)
}

// txn outcome of a data record.
type outcome int8

const (
	decided outcome = iota // committed, or not transactional
	aborted
	open
)

// classify returns, for every record of a partition's log in offset order,
// the outcome of its transaction and the offset of the marker that ended
// it (-1 when none): a producer's transactional records stay pending until
// that producer's next control record, whose key (int16 version, int16
// type) says abort (0) or commit (1).
func classify(recs []rec) ([]outcome, []int64) {
	outs := make([]outcome, len(recs))
	ends := make([]int64, len(recs))
	pending := map[int64][]int{}
	for i, rc := range recs {
		ends[i] = -1
		switch {
		case rc.control && rc.marker:
			for _, j := range pending[rc.pid] {
				ends[j] = rc.offset
				if rc.abort {
					outs[j] = aborted
				} else {
					outs[j] = decided
				}
			}
			delete(pending, rc.pid)
		case rc.control:
		case rc.txnal:
			outs[i] = open
			pending[rc.pid] = append(pending[rc.pid], i)
		}
	}
	return outs, ends
}

// readLog reads every partition in until from its log start (start) up to,
// not including, until[tp], with the given isolation level and control
// records kept, so positions reach offsets that hold transaction markers.
func (r *Reader) readLog(ctx context.Context, iso kgo.IsolationLevel, start, until map[record.TopicPartition]int64) (map[record.TopicPartition][]rec, error) {
	parts := map[string]map[int32]kgo.Offset{}
	pos := map[record.TopicPartition]int64{}
	for tp, end := range until {
		if end <= start[tp] {
			continue
		}
		if parts[tp.Topic] == nil {
			parts[tp.Topic] = map[int32]kgo.Offset{}
		}
		parts[tp.Topic][tp.Partition] = kgo.NewOffset().At(start[tp])
		pos[tp] = start[tp]
	}
	out := map[record.TopicPartition][]rec{}
	if len(pos) == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(slices.Concat(r.opts, []kgo.Opt{
		kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(time.Second),
	})...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	isoName := "read_uncommitted"
	if iso == kgo.ReadCommitted() {
		isoName = "read_committed"
	}
	done := func() bool {
		for tp, p := range pos {
			if p < until[tp] {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var behind []string
			for _, tp := range sortedKeys(pos) {
				if pos[tp] < until[tp] {
					behind = append(behind, fmt.Sprintf("%s at %d of %d", tp, pos[tp], until[tp]))
				}
			}
			return nil, fmt.Errorf("%s read did not reach the end: %s: %w", isoName, strings.Join(behind, ", "), ctx.Err())
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("%s read of %s/%d: %w", isoName, t, p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(kr *kgo.Record) {
			tp := record.TopicPartition{Topic: kr.Topic, Partition: kr.Partition}
			if kr.Offset >= until[tp] || kr.Offset < pos[tp] {
				return
			}
			pos[tp] = kr.Offset + 1
			out[tp] = append(out[tp], r.record(kr))
		})
	}
	return out, nil
}

// record is kr as the checks read it: its marks, group and count parsed
// as the source's checks need them.
func (r *Reader) record(kr *kgo.Record) rec {
	rc := toRec(kr)
	if rc.control {
		return rc
	}
	if r.src.Poison {
		rc.mark = MarkOf(kr.Key, kr.Value)
	}
	if len(r.src.GroupBy) > 0 && slices.Contains(r.src.Inputs, kr.Topic) {
		rc.group, rc.grouped = r.src.GroupBy.Key(kr.Value)
	}
	if r.src.Aggregate && slices.Contains(r.src.Outputs, kr.Topic) {
		rc.count, rc.countKey, rc.countOK = ParseAggregate(kr.Value)
	}
	if r.src.Join && slices.Contains(r.src.Outputs, kr.Topic) {
		rc.row, _ = r.src.JoinInto.Raw(kr.Value)
	}
	if r.src.Join && kr.Topic == r.src.JoinTable {
		rc.value = kr.Value
	}
	if r.src.Windows && slices.Contains(r.src.Outputs, kr.Topic) {
		rc.count, rc.countOK = ParseWindowCount(kr.Value)
	}
	return rc
}

func toRec(kr *kgo.Record) rec {
	rc := rec{offset: kr.Offset, pid: kr.ProducerID, txnal: kr.Attrs.IsTransactional(), control: kr.Attrs.IsControl()}
	if rc.control {
		if len(kr.Key) >= 4 && kr.Key[2] == 0 && kr.Key[3] <= 1 {
			rc.marker, rc.abort = true, kr.Key[3] == 0
		}
		return rc
	}
	rc.src, _ = Lineage(kr)
	rc.key, rc.keyed = string(kr.Key), kr.Key != nil
	rc.ts = kr.Timestamp.UnixMilli()
	for _, h := range kr.Headers {
		if h.Key == record.HeaderError {
			rc.err = TruncateError(string(h.Value))
		}
	}
	return rc
}

// Lineage returns the input record an output record was made from, read
// from its lineage headers of either form, and whether they were present
// and valid (record.Lineage).
func Lineage(kr *kgo.Record) (Input, bool) {
	src, ok := record.Lineage(kr.Headers)
	return Input(src), ok
}
