package txn

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What the session knows about its partitions' offsets, for lag metrics
// and /status: the assignment (from the group's callbacks), the committed
// offsets (the client's, after each commit) and the partitions' end
// offsets (from a separate admin client, so that they can be read from any
// goroutine and survive rebuilds).

// assignment is the member's current partitions and group generation,
// written by the client's callbacks and read by anyone.
type assignment struct {
	mu         sync.Mutex
	partitions map[string][]int32
	member     string
	generation int32
}

func (a *assignment) add(cl *kgo.Client, added map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.partitions == nil {
		a.partitions = make(map[string][]int32)
	}
	for t, ps := range added {
		for _, p := range ps {
			if !slices.Contains(a.partitions[t], p) {
				a.partitions[t] = append(a.partitions[t], p)
			}
		}
		slices.Sort(a.partitions[t])
	}
	a.member, a.generation = cl.GroupMetadata()
}

func (a *assignment) remove(removed map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for t, ps := range removed {
		a.partitions[t] = slices.DeleteFunc(a.partitions[t], func(p int32) bool { return slices.Contains(ps, p) })
		if len(a.partitions[t]) == 0 {
			delete(a.partitions, t)
		}
	}
}

func (a *assignment) clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.partitions)
}

// Assigned returns the partitions assigned to this member now, by topic,
// sorted. Safe from any goroutine.
func (s *Session) Assigned() map[string][]int32 {
	s.assigned.mu.Lock()
	defer s.assigned.mu.Unlock()
	out := make(map[string][]int32, len(s.assigned.partitions))
	for t, ps := range s.assigned.partitions {
		out[t] = slices.Clone(ps)
	}
	return out
}

// Identity returns the group and the transactional ID the session was
// made for.
func (s *Session) Identity() (group, transactionalID string) {
	return s.opts.Group, s.opts.TransactionalID
}

// Guarantee returns "exactly_once" or "at_least_once".
func (s *Session) Guarantee() string { return string(s.opts.Guarantee) }

// Sink returns where outputs go: "kafka", or Options.DestinationName.
func (s *Session) Sink() string {
	if s.opts.Destination == nil {
		return "kafka"
	}
	if s.opts.DestinationName == "" {
		return "destination"
	}
	return s.opts.DestinationName
}

// CommitFailing reports, with a Destination, since when committing to it
// has failed without a commit going through (the zero time when the last
// one went through, when none failed yet, and without a Destination),
// whether the last failure was transient (a lost connection, a deadlock, a
// server starting: sink.Transactional.Retriable) rather than one retrying
// is not expected to fix, and its message. A batch fenced or rolled back
// for a row's sake is no failure here. Safe from any goroutine; the
// pipeline's health check reads it.
func (s *Session) CommitFailing() (since time.Time, transient bool, why string) {
	return s.c.commitFailing()
}

// Member returns this member's ID and group generation as of its last
// assignment ("" and 0 before it joined). Safe from any goroutine.
func (s *Session) Member() (memberID string, generation int32) {
	s.assigned.mu.Lock()
	defer s.assigned.mu.Unlock()
	return s.assigned.member, s.assigned.generation
}

// CommittedOffsets returns, per topic and partition, the next offset the
// group has committed for the partitions this member consumed, as of the
// last committed transaction (with a Destination: the offsets stored in
// it for the partitions the member holds). Call it from the loop's
// goroutine.
func (s *Session) CommittedOffsets() map[string]map[int32]int64 { return s.c.committed() }

// Ends are one partition's end offsets.
type Ends struct {
	LogStart   int64 // the first offset still in the log
	LogEnd     int64 // the high watermark: the offset the next record will get
	LastStable int64 // below it, every transaction is decided; what read_committed reads up to
}

// EndOffsets lists the end offsets of every partition of topics, with the
// session's admin client. Safe from any goroutine.
func (s *Session) EndOffsets(ctx context.Context, topics []string) (map[string]map[int32]Ends, error) {
	hwm, err := s.admin.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = hwm.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	lso, err := s.admin.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing last stable offsets: %w", err)
	}
	start, err := s.admin.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = start.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing start offsets: %w", err)
	}
	out := map[string]map[int32]Ends{}
	hwm.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]Ends{}
		}
		e := Ends{LogEnd: o.Offset, LastStable: o.Offset}
		if l, ok := lso.Lookup(o.Topic, o.Partition); ok {
			e.LastStable = l.Offset
		}
		if l, ok := start.Lookup(o.Topic, o.Partition); ok {
			e.LogStart = l.Offset
		}
		out[o.Topic][o.Partition] = e
	})
	return out, nil
}
