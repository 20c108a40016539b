package check

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	if r.src.ReplayGroup != "" {
		if run.Replayed, err = r.groupOffsets(ctx, r.src.ReplayGroup, r.src.DeadLetters); err != nil {
			return run, err
		}
	}
	inStart, inStable, inHigh, err := r.ends(ctx, r.src.Inputs)
	if err != nil {
		return run, err
	}
	run.InputEnds = inHigh

	if run.Inputs, run.Marks, run.InputKeys, run.InputTimes, err = r.readInputs(ctx, inStart, inStable, inHigh); err != nil {
		return run, err
	}
	outs, errs, _, _, err := r.readTopics(ctx, outStart, outStable, outHigh)
	if err != nil {
		return run, fmt.Errorf("reading output: %w", err)
	}
	if r.src.JoinTable != "" {
		if run.Table, err = r.readTable(ctx); err != nil {
			return run, err
		}
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
func (r *Reader) ReadInputs(ctx context.Context) (inputs []Input, ends map[record.TopicPartition]int64, marks map[Input]Mark, err error) {
	start, stable, high, err := r.ends(ctx, r.src.Inputs)
	if err != nil {
		return nil, nil, nil, err
	}
	inputs, marks, _, _, err = r.readInputs(ctx, start, stable, high)
	if err != nil {
		return nil, nil, nil, err
	}
	return inputs, high, marks, nil
}

// readInputs reads the input partitions between start and their ends:
// the records a read_committed reader receives and, with Source.Poison,
// the marks of the marked ones; with Source.Aggregate or Source.Windows
// the keys of those that have one (with Source.GroupBy their group keys);
// with Source.Windows their timestamps.
func (r *Reader) readInputs(ctx context.Context, start, stable, high map[record.TopicPartition]int64) ([]Input, map[Input]Mark, map[Input]string, map[Input]int64, error) {
	in, _, mks, groups, err := r.readTopics(ctx, start, stable, high)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("reading input: %w", err)
	}
	var inputs []Input
	var marks map[Input]Mark
	var keys map[Input]string
	var times map[Input]int64
	if r.src.Poison {
		marks = map[Input]Mark{}
	}
	if r.src.Aggregate || r.src.Windows || r.src.Dedupe || r.src.Join {
		keys = map[Input]string{}
	}
	if r.src.Windows || r.src.Dedupe {
		times = map[Input]int64{}
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
		switch {
		case keys == nil:
		case len(r.src.GroupBy) > 0:
			if g := groups[i]; g.ok {
				keys[src] = g.key
			}
		case o.Keyed:
			keys[src] = o.Key
		}
		if times != nil {
			times[src] = o.Timestamp
		}
	}
	return inputs, marks, keys, times, nil
}

// readTopics reads partitions [start, high) read_uncommitted and
// [start, stable) read_committed, and returns their data records as
// outputs with visibility and transaction outcome filled in, and, at the
// same index, each one's processor.error header (truncated; empty when
// absent), with Source.Poison its mark, and with Source.GroupBy its
// value's group key.
func (r *Reader) readTopics(ctx context.Context, start, stable, high map[record.TopicPartition]int64) ([]Output, []string, []Mark, []groupOf, error) {
	raw, err := r.readLog(ctx, kgo.ReadUncommitted(), start, high)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// A read_committed reader's position stops after the last record it
	// is given below the stable offset (a control record, or a data
	// record not aborted); aborted records at the end of that range are
	// skipped without moving a position we can see.
	outcomes := map[record.TopicPartition][]outcome{}
	ends := map[record.TopicPartition][]int64{}
	targets := map[record.TopicPartition]int64{}
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
		return nil, nil, nil, nil, err
	}

	var outs []Output
	var errs []string
	var marks []Mark
	var groups []groupOf
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
				Topic: tp.Topic, Partition: tp.Partition, Offset: rc.offset, Source: rc.src, Key: rc.key, Keyed: rc.keyed,
				Count: rc.count, CountOK: rc.countOK, CountKey: rc.countKey, Timestamp: rc.ts, Row: rc.row,
				Committed: seen[rc.offset],
				Aborted:   outcomes[tp][i] == aborted,
				TxnEnd:    ends[tp][i],
			}
			o.Pending = !o.Committed && (outcomes[tp][i] == open || rc.offset >= stable[tp])
			delete(seen, rc.offset)
			outs = append(outs, o)
			errs = append(errs, rc.err)
			marks = append(marks, rc.mark)
			groups = append(groups, groupOf{rc.group, rc.grouped})
		}
		// Visible but absent from the read_uncommitted log: only if the
		// log changed under us (retention); keep them as visible.
		for _, rc := range vis[tp] {
			if seen[rc.offset] {
				outs = append(outs, Output{Topic: tp.Topic, Partition: tp.Partition, Offset: rc.offset, Source: rc.src, Key: rc.key, Keyed: rc.keyed,
					Count: rc.count, CountOK: rc.countOK, CountKey: rc.countKey, Timestamp: rc.ts, Row: rc.row, Committed: true, TxnEnd: -1})
				errs = append(errs, rc.err)
				marks = append(marks, rc.mark)
				groups = append(groups, groupOf{rc.group, rc.grouped})
			}
		}
	}
	return outs, errs, marks, groups, nil
}

// groupOf is an input's group key (GroupPath.Key), ok false when its
// value has none.
type groupOf struct {
	key string
	ok  bool
}

// readTable reads every committed record of the join's table topic, to
// its last stable offsets, in offset order per partition.
func (r *Reader) readTable(ctx context.Context) ([]TableRow, error) {
	start, stable, _, err := r.ends(ctx, []string{r.src.JoinTable})
	if err != nil {
		return nil, fmt.Errorf("reading the table %s: %w", r.src.JoinTable, err)
	}
	logs, err := r.readLog(ctx, kgo.ReadCommitted(), start, stable)
	if err != nil {
		return nil, fmt.Errorf("reading the table %s: %w", r.src.JoinTable, err)
	}
	var rows []TableRow
	for _, tp := range sortedKeys(logs) {
		for _, rc := range logs[tp] {
			if !rc.control {
				rows = append(rows, TableRow{Partition: tp.Partition, Offset: rc.offset, Key: rc.key, Value: rc.value})
			}
		}
	}
	return rows, nil
}
