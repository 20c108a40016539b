// Package offsets shows and moves the offsets a consumer group resumes
// from on its input partitions: `processor offsets` and `processor
// offsets reset`. The offsets live where the processor keeps them (a
// Store): the group's committed offsets in Kafka, or a database sink's
// offsets table. A reset is planned first (Plan, a dry run that changes
// nothing) and applied only while the group has no members (Apply), so
// that a running fleet is never moved under it.
//
// A moved offset's metadata keeps the fields of other tools and drops
// the processor's crash count and stream time (txn.Progress.Detached):
// both describe the records before the old offset. The processor then
// starts the partition's stream time unknown and rebuilds it from the
// records it reads from the new offset on, as after a first start.
package offsets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// Partition is one input partition's offsets as the group sees them.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the next offset the group resumes from; -1 when none
	// is stored (the processor then starts where PROCESSOR_START_OFFSET
	// says).
	Committed int64 `json:"committed"`
	// StoredIn is where Committed is kept: "kafka" (the group's
	// committed offset) or "postgres" (the offsets table); "" for none.
	StoredIn string `json:"stored_in,omitempty"`
	// Metadata is the committed offset's metadata (the processor's
	// progress, txn.Progress), as stored.
	Metadata string `json:"metadata,omitempty"`
	// Start and End are the log start and end offsets (the high
	// watermark).
	Start int64 `json:"log_start"`
	End   int64 `json:"log_end"`
	// Lag is End minus Committed, or End minus Start without a
	// committed offset, as kadm counts it.
	Lag int64 `json:"lag"`
}

// TopicPartition names the partition.
func (p Partition) TopicPartition() record.TopicPartition {
	return record.TopicPartition{Topic: p.Topic, Partition: p.Partition}
}

// Tool reads and moves one group's offsets on its input topics.
type Tool struct {
	Admin  *kadm.Client
	Group  string
	Topics []string
	// Store is where the offsets are kept; nil is the group's committed
	// offsets in Kafka (KafkaStore).
	Store Store
}

func (t *Tool) store() Store {
	if t.Store == nil {
		return &KafkaStore{Admin: t.Admin, Group: t.Group}
	}
	return t.Store
}

// Show returns every partition of the input topics, in topic and
// partition order, with the offset the group resumes from, the log start
// and end offsets and the lag. A topic that does not exist is an error.
func (t *Tool) Show(ctx context.Context) ([]Partition, error) {
	starts, err := t.Admin.ListStartOffsets(ctx, t.Topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the log start offsets of %v: %w", t.Topics, err)
	}
	ends, err := t.Admin.ListEndOffsets(ctx, t.Topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the log end offsets of %v: %w", t.Topics, err)
	}
	var ps []Partition
	for _, topic := range t.Topics {
		if _, missing := ends[topic][-1]; missing || len(ends[topic]) == 0 {
			return nil, &MissingTopicError{Topic: topic}
		}
		for p, e := range ends[topic] {
			s := starts[topic][p]
			if err := errors.Join(e.Err, s.Err); err != nil {
				return nil, fmt.Errorf("listing the offsets of %s/%d: %w", topic, p, err)
			}
			ps = append(ps, Partition{Topic: topic, Partition: p, Committed: -1, Start: s.Offset, End: e.Offset})
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
	parts := make([]record.TopicPartition, len(ps))
	for i, p := range ps {
		parts[i] = p.TopicPartition()
	}
	got, err := t.store().Read(ctx, parts)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		p := &ps[i]
		if c, ok := got[p.TopicPartition()]; ok {
			p.Committed, p.Metadata, p.StoredIn = c.Offset, c.Metadata, c.StoredIn
		}
		p.Lag = lag(*p)
	}
	return ps, nil
}

// lag is p's lag: from the committed offset, else from the log start.
func lag(p Partition) int64 {
	from := p.Committed
	if from < 0 {
		from = p.Start
	}
	return max(0, p.End-from)
}

// Selection narrows a reset to one topic, or one partition of it.
type Selection struct {
	Topic     string // "": every input topic
	Partition int32  // with HasPartition
	// HasPartition selects Partition of Topic alone.
	HasPartition bool
}

func (s Selection) has(p Partition) bool {
	return (s.Topic == "" || s.Topic == p.Topic) && (!s.HasPartition || s.Partition == p.Partition)
}

// MissingTopicError is an input topic the cluster does not have: a
// mistake of the configuration.
type MissingTopicError struct{ Topic string }

func (e *MissingTopicError) Error() string {
	return fmt.Sprintf("topic %q does not exist (PROCESSOR_INPUT_TOPICS, or with -replay PROCESSOR_DLQ_TOPIC)", e.Topic)
}

// SelectionError is a Selection that names no input partition: a
// mistake of the command line, not of the cluster.
type SelectionError struct{ msg string }

func (e *SelectionError) Error() string { return e.msg }

// Change is one partition's planned move.
type Change struct {
	Partition
	// To is the offset the partition will resume from.
	To int64 `json:"to"`
	// ToMetadata is the metadata written with To: Metadata when the
	// offset does not move, else Metadata detached from the old offset
	// (no crash count, no stream time).
	ToMetadata string `json:"to_metadata,omitempty"`
	// Clamped says that the offset asked for was outside [Start, End].
	Clamped bool `json:"clamped,omitempty"`
}

// Moves reports whether the change moves the offset (or stores one
// where none was).
func (c Change) Moves() bool { return c.To != c.Committed }

// Plan returns, for the selected partitions, where a reset to target
// would move them; it changes nothing (the dry run). A selection naming
// a topic that is not an input, or a partition the topic does not have,
// is an error.
func (t *Tool) Plan(ctx context.Context, target Target, sel Selection) ([]Change, error) {
	if sel.Topic != "" && !slices.Contains(t.Topics, sel.Topic) {
		return nil, &SelectionError{fmt.Sprintf("-topic %q is not one of the input topics %v", sel.Topic, t.Topics)}
	}
	ps, err := t.Show(ctx)
	if err != nil {
		return nil, err
	}
	ps = slices.DeleteFunc(ps, func(p Partition) bool { return !sel.has(p) })
	if len(ps) == 0 {
		return nil, &SelectionError{fmt.Sprintf("topic %q has no partition %d", sel.Topic, sel.Partition)}
	}
	var byTime kadm.ListedOffsets
	if target.Kind == AtTime {
		if byTime, err = t.Admin.ListOffsetsAfterMilli(ctx, target.Time.UnixMilli(), t.Topics...); err != nil {
			return nil, fmt.Errorf("listing the offsets at %s: %w", target.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), err)
		}
	}
	changes := make([]Change, 0, len(ps))
	for _, p := range ps {
		c := Change{Partition: p}
		switch target.Kind {
		case Earliest:
			c.To = p.Start
		case Latest:
			c.To = p.End
		case AtOffset:
			c.To = min(max(target.Offset, p.Start), p.End)
			c.Clamped = c.To != target.Offset
		case AtTime:
			o, ok := byTime.Lookup(p.Topic, p.Partition)
			if !ok || o.Err != nil {
				return nil, fmt.Errorf("listing the offset of %s/%d at %s: %w", p.Topic, p.Partition, target, o.Err)
			}
			c.To = min(max(o.Offset, p.Start), p.End)
		}
		c.ToMetadata = p.Metadata
		if c.Moves() {
			c.ToMetadata = txn.ParseProgress(p.Metadata).Detached().String()
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// BusyError refuses a reset while the group has members: moving the
// offsets under a running processor would be lost at its next commit,
// or worse, half applied.
type BusyError struct {
	Group, State string
	Members      []string // client IDs and hosts
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("group %q has %d member(s) (state %s: %v); stop every processor of the group first, then reset",
		e.Group, len(e.Members), e.State, e.Members)
}

// Idle returns nil when the group has no members, a *BusyError when it
// has, or the error of asking.
func (t *Tool) Idle(ctx context.Context) error {
	gs, err := t.Admin.DescribeGroups(ctx, t.Group)
	if err != nil {
		return fmt.Errorf("describing group %q: %w", t.Group, err)
	}
	g, ok := gs[t.Group]
	if !ok {
		return fmt.Errorf("describing group %q: no answer for it", t.Group)
	}
	if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
		return fmt.Errorf("describing group %q: %w", t.Group, g.Err)
	}
	if len(g.Members) == 0 {
		return nil
	}
	e := &BusyError{Group: t.Group, State: g.State}
	for _, m := range g.Members {
		e.Members = append(e.Members, m.ClientID+"@"+m.ClientHost)
	}
	return e
}

// Apply writes the changes that move an offset, all in one write of the
// Store, after checking that the group has no members (a *BusyError
// otherwise); the Store checks again just before its write is final. It
// returns the changes it wrote.
func (t *Tool) Apply(ctx context.Context, changes []Change) ([]Change, error) {
	if err := t.Idle(ctx); err != nil {
		return nil, err
	}
	moves := slices.DeleteFunc(slices.Clone(changes), func(c Change) bool { return !c.Moves() })
	if len(moves) == 0 {
		return nil, nil
	}
	if err := t.store().Write(ctx, moves, t.Idle); err != nil {
		return nil, err
	}
	return moves, nil
}
