package txn

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Stream time: per input partition, the largest (bounded) record
// timestamp the processor has seen in offset order, computed by the
// pipeline. The session keeps it where it must survive a crash or a
// rebalance: as field "t" of the committed offset's metadata (Progress),
// written by the very commit that moves the offset, so that the offset
// and the stream time it belongs to are committed or aborted together.
// At an assignment the group's fetch of the committed offsets reads it
// back (a "t" committed with another offset than the one fetched, or
// none, reads as unknown). With a Destination the stored offsets carry
// no metadata yet: stream time then starts unknown at every assignment.

// clocks keeps the stream times of the assigned partitions for a Session.
// The fetch callback runs on the group client's goroutines; everything
// else on the loop's.
type clocks struct {
	mu sync.Mutex
	// committed is the stream time at each partition's committed offset:
	// read at its assignment, then what the last commit wrote.
	committed map[partKey]int64
	// open is what the loop set for the open transaction, which its
	// commit writes.
	open map[partKey]int64
	ids  *topicIDs
}

func newClocks(ids *topicIDs) *clocks {
	return &clocks{committed: map[partKey]int64{}, open: map[partKey]int64{}, ids: ids}
}

// fetched notes the stream times of the partitions just assigned, from
// the metadata of their committed offsets.
func (k *clocks) fetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) {
	type got struct {
		k  partKey
		ms int64
		ok bool
	}
	var all []got
	for pk, p := range k.ids.fetched(ctx, cl, resp) {
		meta := ""
		if p.Metadata != nil {
			meta = *p.Metadata
		}
		ms, ok := ParseProgress(meta).TimeAtOffset(p.Offset)
		all = append(all, got{pk, ms, ok && p.Offset >= 0})
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, g := range all {
		delete(k.open, g.k)
		if g.ok {
			k.committed[g.k] = g.ms
		} else {
			delete(k.committed, g.k)
		}
	}
}

// timeOf is k's committed stream time, if known.
func (k *clocks) timeOf(p partKey) (int64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ms, ok := k.committed[p]
	return ms, ok
}

// pending reports whether the open transaction has stream times to
// write.
func (k *clocks) pending() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.open) > 0
}

// openTime is the stream time the open transaction writes for p.
func (k *clocks) openTime(p partKey) (int64, bool) {
	ms, ok := k.open[p]
	return ms, ok
}

// ended notes how the open transaction ended: on a commit its stream
// times are the committed ones. Either way the loop sets them afresh for
// the next.
func (k *clocks) ended(committed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if committed {
		for p, ms := range k.open {
			k.committed[p] = ms
		}
	}
	clear(k.open)
}

// forget drops what k knows of the partitions of rev (nil: all): a
// partition assigned again reads its stream time anew.
func (k *clocks) forget(rev map[string][]int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if rev == nil {
		clear(k.committed)
		clear(k.open)
		return
	}
	for t, ps := range rev {
		for _, p := range ps {
			delete(k.committed, partKey{t, p})
			delete(k.open, partKey{t, p})
		}
	}
}

// StreamTime returns the stream time, in Unix milliseconds, at the
// committed offset of topic's partition: as read from the committed
// offset's metadata at its assignment, or as the last commit wrote it.
// ok is false when none is known (nothing committed, metadata another
// tool wrote, a Destination). Call it from the loop's goroutine.
func (s *Session) StreamTime(topic string, partition int32) (ms int64, ok bool) {
	return s.clock.timeOf(partKey{topic, partition})
}

// SetStreamTime sets the stream time, in Unix milliseconds, of topic's
// partition after the records of the open transaction: its commit writes
// it beside the partition's offset, and it is the committed one from
// then on. An abort forgets it. Call it from the loop's goroutine, before
// End.
func (s *Session) SetStreamTime(topic string, partition int32, ms int64) {
	s.clock.mu.Lock()
	s.clock.open[partKey{topic, partition}] = ms
	s.clock.mu.Unlock()
}

// commitContext returns ctx with the functions that write the progress
// of each partition into the batch's offset commit: the transaction's
// (kgo.PreTxnCommitFnContext) or, at least once, the plain one
// (kgo.PreCommitFnContext). A partition's metadata carries its stream
// time when the open transaction set one, and its crash count while it
// is a suspect (crashesend.go); with neither, the client's default
// metadata, which clears the count.
func (s *Session) commitContext(ctx context.Context) context.Context {
	solo := s.crash != nil && s.crash.Solo()
	if !solo && !s.clock.pending() {
		return ctx
	}
	fill := func(topic string, partition int32, offset int64, meta **string) {
		k := partKey{topic, partition}
		var p Progress
		known := false
		if solo {
			p, known = s.crash.carryFor(k, offset)
		}
		s.clock.mu.Lock()
		if ms, ok := s.clock.openTime(k); ok {
			p.Time, p.TimeAt, p.Timed, known = ms, offset, true, true
		}
		s.clock.mu.Unlock()
		if known {
			*meta = kmsg.StringPtr(p.String())
		}
	}
	ctx = kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				fill(t.Topic, t.Partitions[j].Partition, t.Partitions[j].Offset, &t.Partitions[j].Metadata)
			}
		}
		return nil
	})
	return kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				fill(t.Topic, t.Partitions[j].Partition, t.Partitions[j].Offset, &t.Partitions[j].Metadata)
			}
		}
		return nil
	})
}

// offsetsFetched is the group client's OnOffsetsFetched: the committed
// offsets and metadata of the partitions just assigned, for the crash
// attempts and the stream times. It never fails the group session.
func (s *Session) offsetsFetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	if s.crash != nil {
		if err := s.crash.fetched(ctx, cl, resp); err != nil {
			return err
		}
	}
	s.clock.fetched(ctx, cl, resp)
	return nil
}
