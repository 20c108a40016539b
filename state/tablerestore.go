package state

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Restore brings the table up to its end offsets, taken when Restore
// begins, and keeps it current from then on (a follower applies what is
// written after them): co-partitioned, for partitions (those of the input
// assigned to this instance), global, for every partition of the table
// whatever partitions says. Call it on assignment, before any record of
// those partitions is processed; lookups of a partition fail with
// ErrTableNotReady until it returned. It blocks until every partition is
// restored or ctx ends.
//
// A partition reads from its checkpoint, or from the start of the topic
// (its local rows wiped first) without one, or with one the topic cannot
// have written (ahead of its end, before its start, of a topic since
// recreated): the reasons of Manager.Restore. A global table rebuilds all
// of its partitions when one must, as they share one key space. A
// transaction still open on the table topic holds Restore back until it
// ends (read_committed).
func (t *Table) Restore(ctx context.Context, partitions []int32) error {
	t.stop()
	if e := t.failed.Load(); e != nil {
		return *e
	}
	cl, err := kgo.NewClient(t.o.ClientOpts...)
	if err != nil {
		return fmt.Errorf("state: creating the restore client of table %s: %w", t.o.Topic, err)
	}
	defer cl.Close()
	d, starts, ends, err := listTable(ctx, kadm.NewClient(cl), t.o.Topic)
	if err != nil {
		return err
	}
	if t.o.Global {
		partitions = d.Partitions.Numbers()
	}
	slices.Sort(partitions)
	t.ready.Store(&map[int32][]byte{})
	t.id = d.ID
	plan := make([]*restoring, 0, len(partitions))
	for _, p := range partitions {
		s, okS := starts.Lookup(t.o.Topic, p)
		e, okE := ends.Lookup(t.o.Topic, p)
		pd, okP := d.Partitions[p]
		if !okS || !okE || !okP {
			return fmt.Errorf("state: table %s has no partition %d", t.o.Topic, p)
		}
		plan = append(plan, &restoring{p: part{t.o.Topic, p}, id: d.ID, leader: pd.Leader, from: s.Offset, end: e.Offset})
	}
	if err := t.plan(plan); err != nil {
		return err
	}
	begun := time.Now()
	if err := t.read(ctx, cl, plan); err != nil {
		return err
	}
	if err := t.finish(plan, time.Since(begun)); err != nil {
		return err
	}
	return t.follow(plan)
}

// plan reads the checkpoints of plan's partitions, wipes those to
// rebuild and says where each one starts (plan's from is the topic's
// start when plan is called).
func (t *Table) plan(plan []*restoring) error {
	parts := map[int32]*tablePart{}
	rebuildAll := false
	for _, r := range plan {
		st, err := t.db.readPart(r.p)
		if err != nil {
			return err
		}
		tp := &tablePart{st: st, restoring: true, end: r.end, stable: r.end}
		switch why := rebuildWhy(st, r.id, r.from, r.end, t.wiped); why {
		case "":
		case "new":
			tp.st = partState{}
		default:
			tp.rebuilt, rebuildAll = true, t.o.Global
			t.log.Info("table rebuilding from the topic's start", "table", t.o.Topic, "partition", r.p.partition, "reason", why)
			if !t.o.Global {
				if err := t.db.wipe(r.p); err != nil {
					return err
				}
				tp.st = partState{}
			}
		}
		parts[r.p.partition] = tp
	}
	scopes := map[int32]partState{}
	if t.o.Global {
		if rebuildAll {
			if err := t.wipeAll(plan); err != nil {
				return err
			}
		}
		st, err := t.db.readPart(part{t.o.Topic, globalScope})
		if err != nil {
			return err
		}
		scopes[globalScope] = st
	}
	for _, r := range plan {
		tp := parts[r.p.partition]
		if rebuildAll {
			tp.st, tp.rebuilt = partState{}, true
		}
		if tp.st.hasCP {
			r.from = tp.st.cp.next // else the topic's start
		}
		r.pos, tp.from = r.from, r.from
		if !t.o.Global {
			scopes[r.p.partition] = tp.st
		}
	}
	t.mu.Lock()
	t.parts, t.stats = parts, scopes
	t.mu.Unlock()
	return nil
}

// wipeAll wipes a global table: its rows and every partition's
// checkpoint.
func (t *Table) wipeAll(plan []*restoring) error {
	if err := t.db.wipe(part{t.o.Topic, globalScope}); err != nil {
		return err
	}
	for _, r := range plan {
		if err := t.db.wipe(r.p); err != nil {
			return err
		}
	}
	return nil
}

// rebuildWhy is Manager.rebuildReason for a partition of persisted state
// st of a topic of ID id, offsets start to end; wiped is why the local
// store was wiped at open ("damaged", "layout"), "" when it was not.
func rebuildWhy(st partState, id [16]byte, start, end int64, wiped string) string {
	switch {
	case !st.hasCP && wiped != "":
		return wiped
	case !st.hasCP && start == end:
		return "new"
	case !st.hasCP:
		return "no_checkpoint"
	case st.cp.topicID != id:
		return "topic_recreated"
	case st.cp.next > end:
		return "checkpoint_ahead"
	case st.cp.next < start:
		return "checkpoint_before_start"
	}
	return ""
}

// read reads the partitions of plan from their positions to their ends
// (see drain), applying each response's rows with its checkpoint.
func (t *Table) read(ctx context.Context, cl *kgo.Client, plan []*restoring) error {
	apply := func(x fetched) error {
		err := t.apply(x.r.p.partition, t.rows(x.recs), x.next, x.next >= x.r.end)
		x.r.pos = x.next
		return err
	}
	if err := drain(ctx, cl, slices.Values(plan), "state: restoring table "+t.o.Topic+" interrupted", t.reset, apply); err != nil {
		return err
	}
	for _, r := range plan {
		if r.pos < r.end {
			return fmt.Errorf("state: restoring table %s interrupted with partition %d at %d of %d: %w", t.o.Topic, r.p.partition, r.pos, r.end, context.Cause(ctx))
		}
	}
	return nil
}

// reset voids what r read so far and rebuilds it from next, its new log
// start (records deleted under the restore). A global table cannot
// rebuild one partition alone: its Restore fails, and the next one
// rebuilds it whole.
func (t *Table) reset(r *restoring, next int64) error {
	if t.o.Global {
		_ = t.db.wipe(r.p) // no checkpoint: the next Restore rebuilds every partition
		return fmt.Errorf("state: table %s/%d: its start moved past the restore (records deleted); restoring again rebuilds it", t.o.Topic, r.p.partition)
	}
	if err := t.db.wipe(r.p); err != nil {
		return err
	}
	t.log.Warn("table rebuilding from the topic's start: its start moved past the restore", "table", t.o.Topic, "partition", r.p.partition, "start", next)
	t.mu.Lock()
	t.stats[r.p.partition] = partState{}
	if tp := t.parts[r.p.partition]; tp != nil {
		tp.restored, tp.rebuilt, tp.from = 0, true, next
	}
	t.mu.Unlock()
	r.pos = next
	return t.apply(r.p.partition, nil, next, next >= r.end)
}

// finish makes the partitions of plan, read to their ends in took, ready.
func (t *Table) finish(plan []*restoring, took time.Duration) error {
	for _, r := range plan {
		// A partition read to its end without a row (empty, or only
		// markers left) checkpoints its end all the same, so that rows
		// written later never make it look unknown.
		t.mu.Lock()
		st := t.parts[r.p.partition].st
		t.mu.Unlock()
		if !st.hasCP || st.cp.next != r.pos || st.cp.topicID != r.id {
			if err := t.apply(r.p.partition, nil, r.pos, true); err != nil {
				return err
			}
		}
	}
	ready := map[int32][]byte{}
	t.mu.Lock()
	for _, r := range plan {
		tp := t.parts[r.p.partition]
		tp.restoring = false
		tp.st.cp, tp.st.hasCP = checkpoint{next: r.pos, topicID: r.id}, true
		ready[t.scope(r.p.partition)] = part{t.o.Topic, t.scope(r.p.partition)}.prefix()
		t.log.Info("table restored", "table", t.o.Topic, "partition", r.p.partition, "rows", tp.restored,
			"from", tp.from, "to", r.end, "rebuilt", tp.rebuilt, "seconds", took.Seconds())
	}
	t.mu.Unlock()
	t.wiped = ""
	t.ready.Store(&ready)
	return nil
}
