// Package replay runs dead letters through the chain again (`processor
// replay`), exactly once. The replay is the processor's own loop
// (package pipeline) with the dead-letter topic as its input, in a
// consumer group of its own, and with Restore as the chain's first
// stage: a dead letter the Filter selects becomes the record it was made
// from again (its value, key and headers without the processor.error.*
// ones), and the pipeline (Options.Replay) gives the chain, the outputs'
// lineage and a new dead letter the input it came from. Its outputs and
// the replay group's offsets on the dead-letter topic commit in one
// transaction, so a replay that dies resumes where its last transaction
// ended, without duplicates.
//
// A replay stops at the end of the dead-letter topic it captured when it
// started (Capture; the session's txn.Options.StopAt): a record that fails
// again is written to the same topic, after that end, with
// processor.error.replays counting its replays, and is left for a later
// replay rather than run again in a loop.
package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// Filter selects the dead letters to replay; the zero Filter selects
// every one. A dead letter not selected is passed over: the replay
// group's offsets move past it, and it has no outputs.
type Filter struct {
	// Since and Until bound the dead letter's timestamp (the timestamp of
	// the record it was made from, which the processor keeps): Since
	// inclusive, Until exclusive; zero is no bound.
	Since, Until time.Time
	// From and To bound the dead letter's offset in the dead-letter
	// topic, on every partition or on Partition alone: From inclusive,
	// To exclusive; -1 is no bound.
	From, To int64
	// Partition, when not -1, selects the dead letters of that partition
	// of the dead-letter topic alone.
	Partition int32
	// Error, when set, selects the dead letters whose processor.error
	// header contains it.
	Error string
	// Header, when set, selects the dead letters that carry the header
	// of that name with the value HeaderValue (processor.error.transform
	// =jq, say).
	Header, HeaderValue string
}

// All is the Filter that selects every dead letter.
func All() Filter { return Filter{From: -1, To: -1, Partition: -1} }

// Match reports whether f selects r, a record of the dead-letter topic.
func (f Filter) Match(r *kgo.Record) bool {
	switch {
	case f.Partition >= 0 && r.Partition != f.Partition,
		f.From >= 0 && r.Offset < f.From,
		f.To >= 0 && r.Offset >= f.To,
		!f.Since.IsZero() && r.Timestamp.Before(f.Since),
		!f.Until.IsZero() && !r.Timestamp.Before(f.Until):
		return false
	}
	if f.Error != "" && !strings.Contains(header(r.Headers, record.HeaderError), f.Error) {
		return false
	}
	if f.Header != "" {
		v, ok := lookup(r.Headers, f.Header)
		if !ok || v != f.HeaderValue {
			return false
		}
	}
	return true
}

// Restore is the replay chain's first stage: it drops the dead letters
// the Filter does not select, and those it cannot replay (records
// without processor.error or lineage, which are no dead letters of the
// processor, and dead letters whose value was dropped), and turns the
// others back into the records they were made from.
type Restore struct {
	Filter Filter
}

// Process implements transform.Transform.
func (s *Restore) Process(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	if !s.Filter.Match(r) || !Replayable(r) {
		return out, nil
	}
	hs := make([]kgo.RecordHeader, 0, len(r.Headers))
	for _, h := range r.Headers {
		if !record.IsDeadLetterHeader(h.Key) && !record.IsLineageHeader(h.Key) {
			hs = append(hs, h)
		}
	}
	r.Headers = hs
	return append(out, r), nil
}

// Touches implements transform.Toucher: headers only, so that a schema
// codec after it decodes what the chain needs, no more.
func (s *Restore) Touches() transform.Parts { return 0 }

// Replayable reports whether r is a dead letter of the processor that
// can be run again: it carries processor.error and a valid lineage, and
// its value was not dropped.
func Replayable(r *kgo.Record) bool {
	if _, ok := lookup(r.Headers, record.HeaderError); !ok {
		return false
	}
	if _, ok := lookup(r.Headers, record.HeaderErrorValueDropped); ok {
		return false
	}
	_, ok := record.Lineage(r.Headers)
	return ok
}

func lookup(hs []kgo.RecordHeader, key string) (string, bool) {
	v, ok := "", false
	for _, h := range hs {
		if h.Key == key {
			v, ok = string(h.Value), true // the last one counts, as for lineage
		}
	}
	return v, ok
}

func header(hs []kgo.RecordHeader, key string) string {
	v, _ := lookup(hs, key)
	return v
}

// Bounds are where a replay of a dead-letter topic starts and stops, per
// partition, as captured when it starts.
type Bounds struct {
	Topic string
	// Stop is each partition's last stable offset at the capture: what
	// a read_committed reader could read then. The replay reads nothing
	// at or past it (txn.Options.StopAt).
	Stop map[int32]int64
	// From is where the replay group resumes each partition: its
	// committed offset, else the log start.
	From map[int32]int64
}

// Capture reads the Bounds of a replay of topic by group started now.
func Capture(ctx context.Context, adm *kadm.Client, group, topic string) (*Bounds, error) {
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing the last stable offsets of %s: %w", topic, err)
	}
	if _, missing := lso[topic][-1]; missing || len(lso[topic]) == 0 {
		return nil, &MissingTopicError{Topic: topic}
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing the log start offsets of %s: %w", topic, err)
	}
	at, err := committed(ctx, adm, group, topic)
	if err != nil {
		return nil, err
	}
	b := &Bounds{Topic: topic, Stop: map[int32]int64{}, From: map[int32]int64{}}
	for p, o := range lso[topic] {
		s, _ := starts.Lookup(topic, p)
		if err := errors.Join(o.Err, s.Err); err != nil {
			return nil, fmt.Errorf("listing the offsets of %s/%d: %w", topic, p, err)
		}
		from, ok := at[p]
		if !ok || from < s.Offset {
			from = s.Offset
		}
		b.Stop[p], b.From[p] = o.Offset, from
	}
	return b, nil
}

// MissingTopicError is a dead-letter topic the cluster does not have: a
// mistake of the configuration.
type MissingTopicError struct{ Topic string }

func (e *MissingTopicError) Error() string {
	return fmt.Sprintf("the dead-letter topic %q does not exist (PROCESSOR_DLQ_TOPIC)", e.Topic)
}

// Left is how many records the replay has to read (control records
// included).
func (b *Bounds) Left() int64 {
	var n int64
	for p, stop := range b.Stop {
		n += max(0, stop-b.From[p])
	}
	return n
}

// StopAt is Stop as txn.Options.StopAt takes it.
func (b *Bounds) StopAt() map[string]map[int32]int64 {
	return map[string]map[int32]int64{b.Topic: b.Stop}
}

// Reached reports whether group has read every partition up to its
// stop: its committed offset (or, without one, From) is at the stop or
// past it.
func (b *Bounds) Reached(ctx context.Context, adm *kadm.Client, group string) (bool, error) {
	at, err := committed(ctx, adm, group, b.Topic)
	if err != nil {
		return false, err
	}
	for p, stop := range b.Stop {
		c, ok := at[p]
		if !ok {
			c = b.From[p]
		}
		if c < stop {
			return false, nil
		}
	}
	return true, nil
}

// committed returns group's committed offsets on topic.
func committed(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	rs, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("fetching the offsets of group %q: %w", group, err)
	}
	out := map[int32]int64{}
	for p, r := range rs[topic] {
		if r.Err == nil && r.At >= 0 {
			out[p] = r.At
		}
	}
	return out, nil
}
