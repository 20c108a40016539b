package txn

import (
	"context"
	"iter"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicIDs names the input topics by their IDs, as an OffsetFetch of
// version 10 or later answers with IDs: the crash attempts and the stream
// times read the committed offsets' metadata from it.
type topicIDs struct {
	topics []string
	log    *slog.Logger

	mu  sync.Mutex
	ids map[[16]byte]string
}

func newTopicIDs(topics []string, log *slog.Logger) *topicIDs {
	return &topicIDs{topics: topics, log: log, ids: map[[16]byte]string{}}
}

// name returns the input topic of id, asking the cluster once ("" when it
// cannot).
func (n *topicIDs) name(ctx context.Context, cl *kgo.Client, id [16]byte) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.ids[id]; ok {
		return name
	}
	tds, err := kadm.NewClient(cl).ListTopics(ctx, n.topics...)
	if err != nil {
		n.log.Warn("cannot name the topics of the committed offsets; their crash attempts and stream times are not read", "err", err.Error())
		return ""
	}
	for _, td := range tds {
		n.ids[td.ID] = td.Topic
	}
	return n.ids[id]
}

// fetched yields the partitions of an OffsetFetch response that came
// without an error, each with its topic named (by name, which version 10
// and later leave empty, or else by id).
func (n *topicIDs) fetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) iter.Seq2[partKey, *kmsg.OffsetFetchResponseGroupTopicPartition] {
	return func(yield func(partKey, *kmsg.OffsetFetchResponseGroupTopicPartition) bool) {
		for _, g := range resp.Groups {
			for _, t := range g.Topics {
				topic := t.Topic
				if topic == "" {
					topic = n.name(ctx, cl, t.TopicID)
				}
				for i := range t.Partitions {
					p := &t.Partitions[i]
					if kerr.ErrorForCode(p.ErrorCode) == nil && !yield(partKey{topic, p.Partition}, p) {
						return
					}
				}
			}
		}
	}
}
