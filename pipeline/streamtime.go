package pipeline

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Stream time (transform.StreamTimeOf; docs/state.md): per input
// partition, the largest record timestamp seen so far in offset order,
// bounded by the wall clock plus Options.MaxFutureSkew. The loop computes
// it for a poll before its records go to the workers (advanceTime), and
// each record runs with the stream time as of itself, so results do not
// depend on how records were batched into polls or transactions. The
// session keeps it beside each partition's committed offset (streamClock):
// a transaction's commit writes the stream time after its records, an
// abort goes back to the committed one, and a partition assigned anew
// starts from the committed one.

// DefaultMaxFutureSkew is Options.MaxFutureSkew's default.
const DefaultMaxFutureSkew = time.Minute

// streamClock is what a session that keeps stream times offers the loop;
// *txn.Session does. Without it stream time starts unknown at every
// start and is not kept.
type streamClock interface {
	// StreamTime is the stream time at a partition's committed offset.
	StreamTime(topic string, partition int32) (ms int64, ok bool)
	// SetStreamTime sets what the open transaction's commit writes.
	SetStreamTime(topic string, partition int32, ms int64)
}

// clock is the loop's stream times.
type clock struct {
	on    bool
	epoch uint64 // the assignment epoch parts is of
	parts map[record.TopicPartition]*partTime
	// at is, per record of the last poll in the order pool.split cuts
	// them, the stream time as of that record (-1: unknown).
	at []int64
}

// partTime is one partition's stream time: as committed, and after the
// records of the open transaction (-1: unknown).
type partTime struct {
	committed, open int64
	touched         bool  // the open transaction has records of it
	first           int64 // as of its first record in the last poll
}

// unknownTime is a stream time not known yet.
const unknownTime = -1

// initClock turns stream time on: for a chain that keeps state, whose
// stateful stages judge time by it.
func (p *Pipeline) initClock() {
	p.clock.on = true
	p.clock.parts = map[record.TopicPartition]*partTime{}
	for i := range p.pool.workers {
		if h := p.pool.workers[i].stores; h != nil {
			h.lateTopic = p.o.LateTopic
		}
	}
}

// advanceTime computes the stream times of fs's records, in the order
// pool.split cuts them, and counts the records stamped beyond the bound.
// Call it right before the records run, once per poll.
func (p *Pipeline) advanceTime(fs kgo.Fetches) {
	c := &p.clock
	c.at = c.at[:0]
	if !c.on {
		return
	}
	if e := p.s.AssignmentEpoch(); e != c.epoch {
		// Partitions assigned anew start from their committed stream
		// time; the open transaction's stay as they are (a rebalance
		// that took them aborts it).
		c.epoch = e
		for k, pt := range c.parts {
			if !pt.touched {
				delete(c.parts, k)
			}
		}
	}
	limit := p.timeLimit()
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			for k := range t.Partitions {
				part := &t.Partitions[k]
				if len(part.Records) == 0 {
					continue
				}
				pt := p.partTime(t.Topic, part.Partition)
				pt.touched = true
				pt.first = unknownTime
				for i, r := range part.Records {
					if !r.Attrs.IsControl() {
						ts := r.Timestamp.UnixMilli()
						if ts > limit {
							ts = limit
							p.open.counts.future++
						}
						pt.open = max(pt.open, ts)
					}
					c.at = append(c.at, pt.open)
					if i == 0 {
						pt.first = pt.open
					}
				}
			}
		}
	}
}

// timeLimit is the furthest a record moves stream time now: the wall
// clock plus Options.MaxFutureSkew, in Unix milliseconds. Timestamps
// beyond it (a clock far ahead, microseconds written as milliseconds)
// count as it.
func (p *Pipeline) timeLimit() int64 {
	return time.Now().UnixMilli() + p.o.MaxFutureSkew.Milliseconds()
}

// partTime returns the stream time of topic's partition, from the
// committed one when the loop knows nothing of it yet.
func (p *Pipeline) partTime(topic string, partition int32) *partTime {
	k := record.TopicPartition{Topic: topic, Partition: partition}
	if pt := p.clock.parts[k]; pt != nil {
		return pt
	}
	pt := &partTime{committed: unknownTime}
	if sc, ok := p.s.(streamClock); ok {
		if ms, ok := sc.StreamTime(topic, partition); ok && ms >= 0 {
			pt.committed = ms
		}
	}
	pt.open = pt.committed
	p.clock.parts[k] = pt
	return pt
}

// streamAt is the stream time of record i of the last poll (in the order
// pool.split cuts them).
func (p *Pipeline) streamAt(i int) int64 {
	if i < len(p.clock.at) {
		return p.clock.at[i]
	}
	return unknownTime
}

// endTime hands the session the stream times the open transaction's
// commit writes, before it ends.
func (p *Pipeline) endTime(abort bool) {
	sc, ok := p.s.(streamClock)
	if !ok || abort || !p.clock.on {
		return
	}
	for k, pt := range p.clock.parts {
		if pt.touched && pt.open >= 0 {
			sc.SetStreamTime(k.Topic, k.Partition, pt.open)
		}
	}
}

// settleTime applies the end of the open transaction to the stream
// times: committed, they are the committed ones; aborted, the records
// are processed again from the committed ones.
func (p *Pipeline) settleTime(committed bool) {
	for _, pt := range p.clock.parts {
		if !pt.touched {
			continue
		}
		if committed {
			pt.committed = pt.open
		} else {
			pt.open = pt.committed
		}
		pt.touched = false
	}
}

// StreamTime implements transform.StreamTimer for the record the worker
// runs.
func (h *storeHolder) StreamTime() (int64, bool) { return h.stream, h.stream >= 0 }

// pollTime is the stream time of topic's partition as of its first
// record in the last poll, or with last after its last record: the
// times its expiry runs at (expireState).
func (p *Pipeline) pollTime(topic string, partition int32, last bool) (int64, bool) {
	pt := p.clock.parts[record.TopicPartition{Topic: topic, Partition: partition}]
	switch {
	case pt == nil:
		return 0, false
	case last:
		return pt.open, pt.open >= 0
	}
	return pt.first, pt.first >= 0
}
