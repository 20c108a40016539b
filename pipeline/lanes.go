package pipeline

import (
	"hash/maphash"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A chain that bounds how many records of a partition run at once
// (transform.Concurrent, pool.lanes above 0) waits on a service, not on a
// CPU: a poll lasts as long as its most loaded lane takes, one record
// after another. Dealing by a hash of the key leaves the lanes uneven (1,000
// keys of one record each over 8 lanes: the fullest holds about 140 where
// 125 is the average), so such a chain's records are dealt by load
// instead (dealByLoad):
//
//   - a poll's records are weighed first: per key of a partition, how many
//     of its records the poll holds; records with a null key and
//     transaction markers go to their partition's home, as under hashing,
//     and count towards its load before any key is placed;
//   - then, in input order, the first record of a key places the key's
//     whole weight on the least loaded of the partition's lanes (ties go
//     to the first from home on), and the key's every record in the poll
//     goes there, so its records run on one worker in input order.
//
// A lane's load then exceeds the average by less than the weight of the
// last key placed on it: no more than (n + (L-1)·w)/L records of a poll of
// n records over L lanes, w the heaviest key on it (the greedy bound of
// list scheduling), where hashing leaves any lane with any share.
//
// A key may go to another lane in the next poll. That keeps its order
// because polls do not overlap: process waits for every record of a poll
// (pool.waitRecord) and pool.stop for every worker before it returns, and
// the next poll is dealt only after that. Its records may so run on
// another instance of the chain from one poll to the next; state kept
// from record to record lives in the state stores, which the instances
// share.

// laneKey is one key of one partition in a poll.
type laneKey struct {
	topic     *string // interned (pool.topicNames)
	partition int32
	// h is the key's hash: keys with one hash are placed together, which
	// keeps each in order (and is rare).
	h uint64
}

// laneOf is a key's part of a poll: its records, and the lane its first
// record placed it on (-1 before).
type laneOf struct {
	n, lane int32
}

// pinned reports whether r goes to its partition's home worker whatever
// the dealing: a null key, or a transaction marker.
func pinned(r *kgo.Record) bool {
	return r.Key == nil || r.Attrs.IsControl()
}

// weigh readies dealByLoad for the poll: the weight of every key of every
// batch in pool.keys, and the pinned records' weight on their homes in
// pool.load.
func (pl *pool) weigh() {
	if pl.keys == nil {
		pl.keys = make(map[laneKey]laneOf)
	}
	clear(pl.keys) // keeps the buckets: a poll of as many keys allocates nothing
	if cap(pl.load) < len(pl.workers) {
		pl.load = make([]int, len(pl.workers))
	}
	pl.load = pl.load[:len(pl.workers)]
	clear(pl.load)
	for bi := range pl.batches {
		b := &pl.batches[bi]
		home := pl.home(b)
		for _, r := range b.recs {
			if pinned(r) {
				pl.load[home]++
				continue
			}
			k := laneKey{topic: b.topic, partition: b.partition, h: maphash.Bytes(pl.seed, r.Key)}
			s, ok := pl.keys[k]
			if !ok {
				s.lane = -1
			}
			s.n++
			pl.keys[k] = s
		}
	}
}

// loadWorker returns the worker that runs r, of batch b whose home is
// home, when dealing by load (after weigh): home for a pinned record, the
// lane of r's key, or, for its first record, the least loaded lane.
func (pl *pool) loadWorker(b *batch, r *kgo.Record, home int) int {
	if pinned(r) {
		return home
	}
	k := laneKey{topic: b.topic, partition: b.partition, h: maphash.Bytes(pl.seed, r.Key)}
	s := pl.keys[k]
	if s.lane < 0 {
		s.lane = int32(pl.leastLoaded(home))
		pl.load[s.lane] += int(s.n)
		pl.keys[k] = s
	}
	return int(s.lane)
}

// leastLoaded returns the least loaded of the lanes workers from home on
// (all of them when lanes is not below their number), the first from
// home on among equals.
func (pl *pool) leastLoaded(home int) int {
	n := len(pl.workers)
	span := min(pl.lanes, n)
	best := home
	for i := 1; i < span; i++ {
		if w := (home + i) % n; pl.load[w] < pl.load[best] {
			best = w
		}
	}
	return best
}
