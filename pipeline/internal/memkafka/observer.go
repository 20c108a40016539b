package memkafka

import (
	"context"
	"time"

	"github.com/streamproc/processor/txn"
)

// The Observer: safe from any goroutine.

// Ready reports whether Init has run and Close has not.
func (s *Session) Ready() bool { return s.ready.Load() }

// Connecting is false: there is nothing to wait for.
func (s *Session) Connecting() bool { return false }

// Metrics are the session's transaction metrics.
func (s *Session) Metrics() *txn.Metrics { return s.m }

// Assigned is every partition of the input topics but those revoked.
func (s *Session) Assigned() map[string][]int32 {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	out := map[string][]int32{}
	for _, topic := range s.in {
		var parts []int32
		for p := range s.c.topics[topic].parts {
			if !s.revoked[tp{topic, int32(p)}] {
				parts = append(parts, int32(p))
			}
		}
		out[topic] = parts
	}
	return out
}

// CommittedOffsets are the group's committed offsets of the input topics.
func (s *Session) CommittedOffsets() map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for _, topic := range s.in {
		out[topic] = s.c.Committed(s.group, topic)
	}
	return out
}

// EndOffsets are the ends of topics' partitions, every record being
// stable.
func (s *Session) EndOffsets(_ context.Context, topics []string) (map[string]map[int32]txn.Ends, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	out := map[string]map[int32]txn.Ends{}
	for _, name := range topics {
		if t := s.c.topics[name]; t != nil {
			out[name] = map[int32]txn.Ends{}
			for p, part := range t.parts {
				end := endOf(part)
				out[name][int32(p)] = txn.Ends{LogEnd: end, LastStable: end}
			}
		}
	}
	return out, nil
}

// Identity is the group and the transactional id.
func (s *Session) Identity() (string, string) { return s.group, s.txnID }

// Member is "mem-" and the transactional id, generation 1.
func (s *Session) Member() (string, int32) { return "mem-" + s.txnID, 1 }

// Guarantee is exactly_once.
func (s *Session) Guarantee() string { return "exactly_once" }

// Sink is kafka.
func (s *Session) Sink() string { return "kafka" }

// CommitFailing is never: commits in memory do not fail.
func (s *Session) CommitFailing() (time.Time, bool, string) { return time.Time{}, false, "" }
