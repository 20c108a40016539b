package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Read reads the run: the group's committed offsets, then the ends of the
// output and dead-letter topics (written in the same transactions), the
// committed offsets again, and the ends of the input topics; then the
// records of all of them up to those ends, each topic twice:
// read_uncommitted with control records (to learn every transaction's
// outcome) and read_committed (what a downstream reader sees). Run.Samples
// is left empty.
//
// Against a quiet processor the two offset reads agree. Against a running
// one they bracket the outputs: the first judges which inputs must have
// visible output (lost), the second which outputs the group's progress
// covers.
func (r *Reader) Read(ctx context.Context) (Run, error) {
	var run Run
	var err error
	if len(r.src.Outputs) == 0 {
		return run, errors.New("no output topics to read")
	}
	if run.CommittedEarlier, err = r.committed(ctx); err != nil {
		return run, err
	}
	written := slices.Concat(r.src.Outputs, r.src.DeadLetters)
	outStart, outStable, outHigh, err := r.ends(ctx, written)
	if err != nil {
		return run, err
	}
	if run.Committed, err = r.committed(ctx); err != nil {
		return run, err
	}
	inStart, inStable, inHigh, err := r.ends(ctx, r.src.Inputs)
	if err != nil {
		return run, err
	}
	run.InputEnds = inHigh

	if run.Inputs, run.Marks, err = r.readInputs(ctx, inStart, inStable, inHigh); err != nil {
		return run, err
	}
	outs, errs, _, err := r.readTopics(ctx, outStart, outStable, outHigh)
	if err != nil {
		return run, fmt.Errorf("reading output: %w", err)
	}
	for i, o := range outs {
		if slices.Contains(r.src.DeadLetters, o.Topic) {
			run.DeadLetters = append(run.DeadLetters, DeadLetterRecord{Output: o, Error: errs[i]})
		} else {
			run.Outputs = append(run.Outputs, o)
		}
	}
	return run, nil
}

// ReadInputs reads the input topics only, for a run into PostgreSQL:
// their log-end offsets (high watermarks), then every record a
// read_committed reader receives up to them, and with Source.Poison the
// marks of the marked ones (nil without).
func (r *Reader) ReadInputs(ctx context.Context) (inputs []Input, ends map[TopicPartition]int64, marks map[Input]Mark, err error) {
	start, stable, high, err := r.ends(ctx, r.src.Inputs)
	if err != nil {
		return nil, nil, nil, err
	}
	inputs, marks, err = r.readInputs(ctx, start, stable, high)
	if err != nil {
		return nil, nil, nil, err
	}
	return inputs, high, marks, nil
}

// readInputs reads the input partitions between start and their ends:
// the records a read_committed reader receives and, with Source.Poison,
// the marks of the marked ones.
func (r *Reader) readInputs(ctx context.Context, start, stable, high map[TopicPartition]int64) ([]Input, map[Input]Mark, error) {
	in, _, mks, err := r.readTopics(ctx, start, stable, high)
	if err != nil {
		return nil, nil, fmt.Errorf("reading input: %w", err)
	}
	var inputs []Input
	var marks map[Input]Mark
	if r.src.Poison {
		marks = map[Input]Mark{}
	}
	for i, o := range in {
		if !o.Committed {
			continue
		}
		src := Input{o.Topic, o.Partition, o.Offset}
		inputs = append(inputs, src)
		if r.src.Poison && mks[i].Class != Ordinary {
			marks[src] = mks[i]
		}
	}
	return inputs, marks, nil
}

// rec is what the reader keeps of a record.
type rec struct {
	offset  int64
	pid     int64
	txnal   bool
	control bool
	marker  bool   // control: a commit or abort marker
	abort   bool   // control: an abort marker
	src     Input  // data: lineage; Topic empty when missing
	err     string // data: the processor.error header, truncated
	mark    Mark   // data, with Source.Poison: MarkOf its key and value
}

// txn outcome of a data record.
type outcome int8

const (
	decided outcome = iota // committed, or not transactional
	aborted
	open
)

// readTopics reads partitions [start, high) read_uncommitted and
// [start, stable) read_committed, and returns their data records as
// outputs with visibility and transaction outcome filled in, and, at the
// same index, each one's processor.error header (truncated; empty when
// absent) and, with Source.Poison, its mark.
func (r *Reader) readTopics(ctx context.Context, start, stable, high map[TopicPartition]int64) ([]Output, []string, []Mark, error) {
	raw, err := r.readLog(ctx, kgo.ReadUncommitted(), start, high)
	if err != nil {
		return nil, nil, nil, err
	}
	// A read_committed reader's position stops after the last record it
	// is given below the stable offset (a control record, or a data
	// record not aborted); aborted records at the end of that range are
	// skipped without moving a position we can see.
	outcomes := map[TopicPartition][]outcome{}
	ends := map[TopicPartition][]int64{}
	targets := map[TopicPartition]int64{}
	for tp, recs := range raw {
		outcomes[tp], ends[tp] = classify(recs)
		for i, rc := range recs {
			if rc.offset < stable[tp] && (rc.control || outcomes[tp][i] != aborted) {
				targets[tp] = rc.offset + 1
			}
		}
	}
	vis, err := r.readLog(ctx, kgo.ReadCommitted(), start, targets)
	if err != nil {
		return nil, nil, nil, err
	}

	var outs []Output
	var errs []string
	var marks []Mark
	for _, tp := range sortedKeys(raw) {
		seen := map[int64]bool{}
		for _, rc := range vis[tp] {
			if !rc.control {
				seen[rc.offset] = true
			}
		}
		for i, rc := range raw[tp] {
			if rc.control {
				continue
			}
			o := Output{
				Topic: tp.Topic, Partition: tp.Partition, Offset: rc.offset, Source: rc.src,
				Committed: seen[rc.offset],
				Aborted:   outcomes[tp][i] == aborted,
				TxnEnd:    ends[tp][i],
			}
			o.Pending = !o.Committed && (outcomes[tp][i] == open || rc.offset >= stable[tp])
			delete(seen, rc.offset)
			outs = append(outs, o)
			errs = append(errs, rc.err)
			marks = append(marks, rc.mark)
		}
		// Visible but absent from the read_uncommitted log: only if the
		// log changed under us (retention); keep them as visible.
		for _, rc := range vis[tp] {
			if seen[rc.offset] {
				outs = append(outs, Output{Topic: tp.Topic, Partition: tp.Partition, Offset: rc.offset, Source: rc.src, Committed: true, TxnEnd: -1})
				errs = append(errs, rc.err)
				marks = append(marks, rc.mark)
			}
		}
	}
	return outs, errs, marks, nil
}

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
func (r *Reader) readLog(ctx context.Context, iso kgo.IsolationLevel, start, until map[TopicPartition]int64) (map[TopicPartition][]rec, error) {
	parts := map[string]map[int32]kgo.Offset{}
	pos := map[TopicPartition]int64{}
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
	out := map[TopicPartition][]rec{}
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
			tp := TopicPartition{Topic: kr.Topic, Partition: kr.Partition}
			if kr.Offset >= until[tp] || kr.Offset < pos[tp] {
				return
			}
			pos[tp] = kr.Offset + 1
			rc := toRec(kr)
			if r.src.Poison && !rc.control {
				rc.mark = MarkOf(kr.Key, kr.Value)
			}
			out[tp] = append(out[tp], rc)
		})
	}
	return out, nil
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
	for _, h := range kr.Headers {
		if h.Key == HeaderError {
			rc.err = TruncateError(string(h.Value))
		}
	}
	return rc
}

// Lineage returns the input record an output record was made from, read
// from its lineage headers, and whether all three were present and valid
// (record.Lineage).
func Lineage(kr *kgo.Record) (Input, bool) {
	src, ok := record.Lineage(kr.Headers)
	return Input(src), ok
}
