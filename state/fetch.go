package state

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A restore reads the changelogs with Fetch requests of its own rather
// than a consumer's, for two reasons:
//
//   - Its position is the fetch position: after each response, the offset
//     after the last batch the broker returned, whatever that batch held
//     (records, a transaction marker, an aborted transaction's records, or
//     nothing left by compaction). A partition is restored when that
//     position reaches the end taken when the restore began, so no shape
//     of a changelog's tail (an empty log, a tail that is only a marker,
//     a tail compaction removed) can leave it waiting for a record that
//     will never come.
//   - Its memory is bounded by what it asked for: at most three responses
//     at once (one being applied, one waiting, one being read), each at
//     most fetchMaxBytes, or one batch when a batch is larger. A consumer
//     prefetches and buffers on its own.
//
// Changelog records are small (a dedupe id is about 25 bytes on the wire)
// and each one read costs a decoded record of about 200 bytes until its
// batch is applied, so a fetch of 1 MiB decodes to about 10 MiB: the
// restore's own memory stays in tens of MiB, and larger fetches cost as
// much CPU per record (docs/state.md, "Memory").
const (
	fetchMaxBytes     = 1 << 20 // a response, over every partition of a broker
	fetchMaxPartBytes = 1 << 20 // a partition in a response
	fetchMaxWait      = 500 * time.Millisecond
	fetchBackoff      = 100 * time.Millisecond
)

// fetched is what one response gave for one partition: its records (data
// and control, read_committed) and the fetch position after them. reset
// says that the partition's log start passed the position (records
// deleted under the restore): the records read so far are void, and
// reading starts again at next, the new log start.
type fetched struct {
	r      *restoring
	recs   []*kgo.Record
	next   int64
	stable int64 // the partition's last stable offset, as the response said
	reset  bool
	err    error
}

// fetcher reads the partitions of a plan from their positions to their
// ends, sending every partition's records to out in offset order.
type fetcher struct {
	cl    *kgo.Client
	adm   *kadm.Client
	dec   kgo.Decompressor
	out   chan<- fetched
	parts []*restoring
	pos   map[*restoring]int64
}

// startFetch starts a fetcher over the partitions of plan not yet at
// their ends and returns its responses, one applied while the next is
// read, and stop, which ends the fetcher and waits for it; out is nil
// when every partition is already read.
func startFetch(ctx context.Context, cl *kgo.Client, plan iter.Seq[*restoring]) (out <-chan fetched, stop func()) {
	ch := make(chan fetched, 1)
	f := &fetcher{cl: cl, adm: kadm.NewClient(cl), dec: kgo.DefaultDecompressor(), out: ch, pos: map[*restoring]int64{}}
	for r := range plan {
		if r.pos < r.end {
			f.parts = append(f.parts, r)
			f.pos[r] = r.pos
		}
	}
	if len(f.parts) == 0 {
		return nil, func() {}
	}
	fctx, cancel := context.WithCancel(ctx)
	go f.run(fctx)
	return ch, func() {
		cancel()
		for range ch { // the fetcher stops at its next send
		}
	}
}

// drain reads the partitions of plan from their positions to their ends
// (a fetcher of startFetch), handing each response to reset when the log
// start passed the partition's position and to apply otherwise, until
// the fetcher ends, a response fails, reset or apply fails, or ctx ends,
// which is interrupted (a sentence naming what was restored) wrapping
// ctx's cause. It is the one loop of a restore, the stores'
// (Manager.read) and a join table's (Table.read) alike, which differ
// only in how they apply what was read; it leaves it to them to check
// that every partition reached its end.
func drain(ctx context.Context, cl *kgo.Client, plan iter.Seq[*restoring], interrupted string,
	reset func(r *restoring, next int64) error, apply func(x fetched) error) error {
	out, stop := startFetch(ctx, cl, plan)
	if out == nil {
		return nil
	}
	defer stop()
	for x := range out {
		var err error
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("%s: %w", interrupted, context.Cause(ctx))
		case x.err != nil:
			err = x.err
		case x.reset:
			err = reset(x.r, x.next)
		default:
			err = apply(x)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// run fetches until every partition reached its end, ctx ends or a fetch
// fails for good; it closes out.
func (f *fetcher) run(ctx context.Context) {
	defer close(f.out)
	for {
		byLeader := map[int32][]*restoring{}
		for _, r := range f.parts {
			if f.pos[r] < r.end {
				byLeader[r.leader] = append(byLeader[r.leader], r)
			}
		}
		if len(byLeader) == 0 {
			return
		}
		stale := false
		for leader, rs := range byLeader {
			again, err := f.fetch(ctx, leader, rs)
			if err != nil {
				f.send(ctx, fetched{err: err})
				return
			}
			stale = stale || again
		}
		if stale {
			if err := f.leaders(ctx); err != nil {
				f.send(ctx, fetched{err: err})
				return
			}
		}
	}
}

// send hands one result to the applier, or gives up when ctx ended.
func (f *fetcher) send(ctx context.Context, x fetched) bool {
	select {
	case f.out <- x:
		return true
	case <-ctx.Done():
		return false
	}
}

// fetch sends one Fetch request for rs to leader and hands on what it
// returned; stale says that a partition's leader must be looked up again.
func (f *fetcher) fetch(ctx context.Context, leader int32, rs []*restoring) (stale bool, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes = -1, int32(fetchMaxWait/time.Millisecond), 1
	req.MaxBytes, req.IsolationLevel, req.SessionEpoch = fetchMaxBytes, 1, -1
	byTopic := map[string]int{}
	for _, r := range rs {
		i, ok := byTopic[r.p.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[r.p.topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = r.p.topic, r.id
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = r.p.partition, f.pos[r], fetchMaxPartBytes
		p.CurrentLeaderEpoch, p.LastFetchedEpoch, p.LogStartOffset = -1, -1, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	kresp, err := f.cl.Broker(int(leader)).RetriableRequest(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return true, f.pause(ctx) // the broker went away: look the leader up again
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return false, fmt.Errorf("state: fetching changelogs from broker %d: %w", leader, kerr.ErrorForCode(resp.ErrorCode))
	}
	find := map[part]*restoring{}
	for _, r := range rs {
		find[r.p] = r
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			r := find[part{topicOf(rs, t.Topic, t.TopicID), rp.Partition}]
			if r == nil {
				continue
			}
			again, err := f.partition(ctx, r, rp)
			if err != nil {
				return false, err
			}
			stale = stale || again
		}
	}
	return stale, nil
}

// topicOf names the topic of a response: by name, or by ID (Fetch v13+).
func topicOf(rs []*restoring, name string, id [16]byte) string {
	if name != "" {
		return name
	}
	for _, r := range rs {
		if r.id == id {
			return r.p.topic
		}
	}
	return ""
}

// partition hands on one partition of a response.
func (f *fetcher) partition(ctx context.Context, r *restoring, rp *kmsg.FetchResponseTopicPartition) (stale bool, err error) {
	switch perr := kerr.ErrorForCode(rp.ErrorCode); {
	case perr == nil:
	case errors.Is(perr, kerr.OffsetOutOfRange):
		return false, f.restart(ctx, r)
	case kerr.IsRetriable(perr) || errors.Is(perr, kerr.UnknownTopicID):
		if l := rp.CurrentLeader.LeaderID; l >= 0 && l != r.leader {
			r.leader = l // the broker named the new leader (KIP-951)
			return false, nil
		}
		return true, f.pause(ctx) // a leader moved, or a topic just created
	default:
		return false, fmt.Errorf("state: reading changelog %s/%d at offset %d: %w", r.p.topic, r.p.partition, f.pos[r], perr)
	}
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		KeepControlRecords: true, Offset: f.pos[r], IsolationLevel: kgo.ReadCommitted(),
		Topic: r.p.topic, Partition: r.p.partition,
	}, rp, f.dec, nil)
	if fp.Err != nil {
		return false, fmt.Errorf("state: reading changelog %s/%d at offset %d: %w", r.p.topic, r.p.partition, f.pos[r], fp.Err)
	}
	if next <= f.pos[r] {
		return false, nil // nothing yet (a transaction still open holds the stable offset back)
	}
	f.pos[r] = next
	if !f.send(ctx, fetched{r: r, recs: fp.Records, next: next, stable: rp.LastStableOffset}) {
		return false, ctx.Err()
	}
	return false, nil
}

// restart starts r again at its changelog's log start, which passed its
// position while it was being read (records deleted under the restore).
func (f *fetcher) restart(ctx context.Context, r *restoring) error {
	starts, err := f.adm.ListStartOffsets(ctx, r.p.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("state: changelog %s/%d: offset %d out of range, listing its start: %w", r.p.topic, r.p.partition, f.pos[r], err)
	}
	s, ok := starts.Lookup(r.p.topic, r.p.partition)
	if !ok || s.Offset <= f.pos[r] {
		return fmt.Errorf("state: changelog %s/%d: offset %d out of range, its start %d", r.p.topic, r.p.partition, f.pos[r], s.Offset)
	}
	f.pos[r] = s.Offset
	if !f.send(ctx, fetched{r: r, next: s.Offset, reset: true}) {
		return ctx.Err()
	}
	return nil
}

// leaders looks up the leader of every partition again.
func (f *fetcher) leaders(ctx context.Context) error {
	topics := map[string]bool{}
	for _, r := range f.parts {
		topics[r.p.topic] = true
	}
	list := make([]string, 0, len(topics))
	for t := range topics {
		list = append(list, t)
	}
	details, err := f.adm.ListTopics(ctx, list...)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return f.pause(ctx) // tried again by the next round
	}
	for _, r := range f.parts {
		if pd, ok := details[r.p.topic].Partitions[r.p.partition]; ok && pd.Err == nil && pd.Leader >= 0 {
			r.leader = pd.Leader
		}
	}
	return nil
}

// pause waits fetchBackoff, or until ctx ends.
func (f *fetcher) pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(fetchBackoff):
		return nil
	}
}
