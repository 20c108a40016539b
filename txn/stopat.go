package txn

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

// stopAt trims the records of fs at or past Options.StopAt. A partition
// that had one has been polled up to its stop: its next offset is set to
// the stop, which the transaction then commits, and its fetching is
// paused until an abort rewinds it (resumeStopped).
func (s *Session) stopAt(fs kgo.Fetches) kgo.Fetches {
	if len(s.opts.StopAt) == 0 {
		return fs
	}
	var set map[string]map[int32]kgo.EpochOffset
	var pause map[string][]int32
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			stops, ok := s.opts.StopAt[t.Topic]
			if !ok {
				continue
			}
			for k := range t.Partitions {
				p := &t.Partitions[k]
				stop, ok := stops[p.Partition]
				if !ok {
					continue
				}
				n := sort.Search(len(p.Records), func(x int) bool { return p.Records[x].Offset >= stop })
				if n == len(p.Records) {
					continue
				}
				p.Records = p.Records[:n]
				if set == nil {
					set, pause = map[string]map[int32]kgo.EpochOffset{}, map[string][]int32{}
				}
				if set[t.Topic] == nil {
					set[t.Topic] = map[int32]kgo.EpochOffset{}
				}
				set[t.Topic][p.Partition] = kgo.EpochOffset{Epoch: -1, Offset: stop}
				pause[t.Topic] = append(pause[t.Topic], p.Partition)
			}
		}
	}
	if set != nil {
		s.cl.PauseFetchPartitions(pause)
		s.cl.SetOffsets(set)
		if s.stopped == nil {
			s.stopped = map[string][]int32{}
		}
		for t, ps := range pause {
			s.stopped[t] = append(s.stopped[t], ps...)
		}
	}
	return fs
}

// resumeStopped fetches the partitions stopAt paused again: an abort
// rewound them to their committed offsets, before their stop.
func (s *Session) resumeStopped() {
	if len(s.stopped) == 0 {
		return
	}
	s.cl.ResumeFetchPartitions(s.stopped)
	s.stopped = nil
}
