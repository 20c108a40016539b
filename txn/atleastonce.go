package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// At least once (Options.AtLeastOnce): the same session and loop, without
// transactions. A batch's outputs are produced as it is processed; End
// flushes them, and only once every one is acknowledged commits the
// offsets consumed. An abort, a failed output or a failed commit rewinds
// the consumer to the batch's first offsets, so its input is processed
// again: outputs written before are written twice, none is lost.
// Rebalances wait until the batch has ended (BlockRebalanceOnPoll), so a
// batch never loses its partitions midway.

// pollAtLeastOnce polls and notes, per partition, the first offset of the
// batch, where an abort rewinds to. A poll that opens no batch lets a
// waiting rebalance proceed.
func (s *Session) pollAtLeastOnce(ctx context.Context, max int) kgo.Fetches {
	fs := s.plain.PollRecords(ctx, max)
	s.logFetchErrors(fs)
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		parts := s.batchStart[p.Topic]
		if parts == nil {
			parts = map[int32]kgo.EpochOffset{}
			s.batchStart[p.Topic] = parts
		}
		if _, ok := parts[p.Partition]; !ok {
			first := p.Records[0]
			parts[p.Partition] = kgo.EpochOffset{Epoch: first.LeaderEpoch, Offset: first.Offset}
		}
	})
	if !s.inTxn && fs.NumRecords() == 0 {
		s.plain.AllowRebalance()
	}
	return fs
}

// endAtLeastOnce ends a batch whose outputs End has flushed: it commits
// the consumed offsets unless abort is set or an output failed, and
// otherwise rewinds. It returns whether the offsets were committed and,
// when a commit failed, why.
func (s *Session) endAtLeastOnce(ctx context.Context, abort Reason) (bool, string) {
	defer s.plain.AllowRebalance()
	var why string
	if abort == "" && s.produceErr.Load() == nil {
		err := s.plain.CommitUncommittedOffsets(ctx)
		if err == nil {
			clear(s.batchStart)
			return true, ""
		}
		why = "committing the consumed offsets: " + err.Error()
	}
	s.plain.SetOffsets(s.batchStart)
	clear(s.batchStart)
	return false, why
}
