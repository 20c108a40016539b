package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MissingTopics returns which of topics the cluster does not have. It
// answers nil, nil for no topics, and an error when the cluster cannot say.
func (s *Session) MissingTopics(ctx context.Context, topics []string) ([]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	// A metadata request of its own: kadm's ListTopics may answer from the
	// client's cached metadata, which can predate a topic created a moment
	// ago, and a topic confirmed missing fails records for missingTTL.
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	exists := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic != nil && !errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.UnknownTopicOrPartition) {
			exists[*t.Topic] = true
		}
	}
	var missing []string
	for _, t := range topics {
		if !exists[t] {
			missing = append(missing, t)
		}
	}
	return missing, nil
}
