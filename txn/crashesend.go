package txn

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// How a transaction's end and a partition's revocation touch the crash
// attempts (see crashes.go).

// carry returns the metadata a commit of a's partition at offset off
// writes while it is a suspect: the count goes on until the commit
// passes the culprit or the window. ok is false when the count ends: the
// commit writes the client's default metadata.
func (a *attempt) carry(off int64) (Progress, bool) {
	if !a.suspect || (a.culprit >= 0 && off > a.culprit) || off > a.durable.Extent {
		return Progress{}, false
	}
	m := a.durable
	m.At, m.Solo, m.Alone = off, 0, false
	return m, true
}

// carryFor returns the metadata a commit of k at offset writes for its
// crash count (carry), if any: see Session.commitContext.
func (c *crashes) carryFor(k partKey, offset int64) (Progress, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.parts[k]; a != nil {
		return a.carry(offset)
	}
	return Progress{}, false
}

// ended notes how a transaction ended: committed (cl's committed offsets
// say which partitions it moved), aborted, or with an unknown outcome
// (failed), after which nothing is written back until the next
// assignment, as the transaction may have committed.
func (c *crashes) ended(cl *kgo.Client, committed, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if failed {
		c.inDoubt = true
		return
	}
	if !committed {
		return
	}
	co := cl.CommittedOffsets()
	for k, a := range c.parts {
		eo, ok := co[k.topic][k.partition]
		if !ok || eo.Offset == a.durableAt {
			continue // not in this transaction
		}
		a.live, a.done = false, true
		if m, ok := a.carry(eo.Offset); ok {
			c.stamp(&m, k, eo.Offset)
			a.durable, a.durableAt, a.raw = m, eo.Offset, m.String()
			continue
		}
		if a.suspect {
			a.suspect = false
			c.solo.Add(-1)
			c.log.Info("the records the process died on are behind; back to whole transactions",
				"topic", k.topic, "partition", k.partition, "offset", eo.Offset)
		}
		a.durable, a.durableAt = a.durable.withoutCrashes(), eo.Offset
		c.stamp(&a.durable, k, eo.Offset)
		a.raw = a.durable.String()
	}
}

// doubt notes that a transaction's outcome is unknown (the session is
// rebuilt, or stops fenced): until the next assignment, a partition's
// attempt is taken back only where the group's committed offsets, read
// stable from the broker, are still its marker (revoked).
func (c *crashes) doubt() {
	c.mu.Lock()
	c.inDoubt = true
	c.mu.Unlock()
}

// revoked writes back, for the partitions of rev (nil: all) whose live
// marker no commit has passed, the metadata from before it: they stop
// without having crashed. It then forgets them. With lost it only
// forgets them: another member may own them already.
//
// A session rebuilt, or stopped fenced, is alive too: its attempts are
// no crash, and must not count as one for whichever member polls the
// partitions next (two instances fencing each other would otherwise
// count up to a culprit on a record nothing is wrong with). Its ending's
// outcome is unknown, so the client's view of the committed offsets is
// not to be trusted; the broker's is, once stable: a transaction that
// committed has moved them past the marker, and one that has not yet
// been decided holds them unstable (UNSTABLE_OFFSET_COMMIT) until it is.
// Only a marker the broker still holds, stable, is written back.
func (c *crashes) revoked(ctx context.Context, cl *kgo.Client, rev map[string][]int32, lost bool) {
	c.mu.Lock()
	scope := c.scope(rev)
	live := map[partKey]attempt{}
	for _, k := range scope {
		if a := c.parts[k]; a.live && !lost {
			live[k] = *a
		}
		if c.parts[k].suspect {
			c.solo.Add(-1)
		}
		delete(c.parts, k)
	}
	inDoubt := c.inDoubt
	c.mu.Unlock()
	if len(live) == 0 {
		return
	}
	var held map[partKey]kgo.EpochOffset
	if inDoubt {
		held = c.stableMarkers(ctx, cl, live)
	} else {
		held = map[partKey]kgo.EpochOffset{}
		co := cl.CommittedOffsets()
		for k, a := range live {
			if eo, ok := co[k.topic][k.partition]; ok && eo.Offset == a.marker.At {
				held[k] = eo
			}
		}
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	metas := map[partKey]string{}
	for k, eo := range held {
		if offsets[k.topic] == nil {
			offsets[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[k.topic][k.partition] = eo
		metas[k] = live[k].before
	}
	if len(metas) == 0 {
		return
	}
	for k, err := range commitMeta(ctx, cl, offsets, metas) {
		c.log.Warn("cannot take back the attempt at a partition stopped without a crash; it counts as one",
			"topic", k.topic, "partition", k.partition, "err", err.Error())
	}
}

// stableWait bounds how long a revocation in doubt waits for the group's
// committed offsets to be stable: a transaction the broker has not yet
// decided is, at the latest, aborted at the transaction timeout, which
// a leave must not wait for. The attempt then counts as a crash.
const stableWait = 3 * time.Second

// stableMarkers reads the committed offsets of the partitions of live
// from the broker, waiting while a transaction holds them unstable, and
// returns those whose committed offset and metadata are still their live
// marker.
func (c *crashes) stableMarkers(ctx context.Context, cl *kgo.Client, live map[partKey]attempt) map[partKey]kgo.EpochOffset {
	group, _ := cl.OptValue(kgo.ConsumerGroup).(string)
	topics := map[string]bool{}
	for k := range live {
		topics[k.topic] = true
	}
	ctx, cancel := context.WithTimeout(kadm.RequireStable(ctx), stableWait)
	defer cancel()
	held := map[partKey]kgo.EpochOffset{}
	pending := maps.Clone(live) // not yet read stable
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		resps, err := kadm.NewClient(cl).FetchOffsetsForTopics(ctx, group, slices.Collect(maps.Keys(topics))...)
		unstable := err != nil
		for k, a := range pending {
			if err != nil {
				break // asked again below
			}
			o, ok := resps.Lookup(k.topic, k.partition)
			switch {
			case !ok || o.Err == nil && (o.At != a.marker.At || o.Metadata != a.marker.String()):
				delete(pending, k) // moved on, or not there: nothing to take back
			case o.Err == nil:
				held[k] = kgo.EpochOffset{Epoch: o.LeaderEpoch, Offset: o.At}
				delete(pending, k)
			default:
				unstable = true
			}
		}
		if !unstable || len(pending) == 0 {
			return held
		}
		select {
		case <-ctx.Done():
			why := "the transaction that holds them is still undecided"
			if err != nil {
				why = err.Error()
			}
			for k := range pending {
				c.log.Warn("cannot read the committed offsets, stable, after an ending of unknown outcome; the attempt at the partition counts as a crash",
					"topic", k.topic, "partition", k.partition, "waited", stableWait.String(), "err", why)
			}
			return held
		case <-time.After(wait):
		}
	}
}

// scope lists the partitions of rev that c keeps (nil rev: all).
func (c *crashes) scope(rev map[string][]int32) []partKey {
	var out []partKey
	if rev == nil {
		return slices.Collect(maps.Keys(c.parts))
	}
	for t, ps := range rev {
		for _, p := range ps {
			if _, ok := c.parts[partKey{t, p}]; ok {
				out = append(out, partKey{t, p})
			}
		}
	}
	return out
}

// Solo reports whether a partition's records are suspected of killing
// the process (Options.MaxCrashAttempts): the caller then polls one
// record at a time, ends a transaction after each, and rewinds (aborts)
// a poll that brought more (an assignment came while it waited), without
// calling Attempt for it. Safe from any goroutine.
func (s *Session) Solo() bool { return s.crash != nil && s.crash.Solo() }

// Attempt writes, with Options.MaxCrashAttempts, the markers that the
// records of fs (the last poll) need before they run, and finds the
// culprits among them (TakeCulprits). Call it from the loop's goroutine
// right before the records run, after anything else that could kill the
// process first (a state restore): a process that dies after it is taken
// to have died on these records.
func (s *Session) Attempt(ctx context.Context, fs kgo.Fetches) {
	if s.crash != nil && fs.NumRecords() > 0 {
		s.crash.polled(ctx, s.cl, fs)
	}
}

// TakeCulprits returns the records found, since the last call, to have
// killed the process when they ran alone, and forgets them: the caller
// applies its error policy to each instead of running it. Call it after
// Attempt, from the loop's goroutine.
func (s *Session) TakeCulprits() []Culprit {
	if s.crash == nil {
		return nil
	}
	return s.crash.takeCulprits()
}
