package offsets

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/streamproc/processor/record"
)

// Committed is one partition's stored offset.
type Committed struct {
	Offset   int64
	Metadata string
	StoredIn string // "kafka" or "postgres"
}

// Store is where the offsets a group resumes from are kept.
type Store interface {
	// Read returns the stored offsets of parts; a partition with none is
	// absent.
	Read(ctx context.Context, parts []record.TopicPartition) (map[record.TopicPartition]Committed, error)
	// Write stores the changes' To offsets (and ToMetadata where the
	// store keeps metadata), all of them or, as far as the store allows,
	// none. It calls check just before the write becomes final and
	// gives up, writing nothing, when check fails.
	Write(ctx context.Context, changes []Change, check func(context.Context) error) error
}

// KafkaStore is the group's committed offsets in Kafka.
type KafkaStore struct {
	Admin *kadm.Client
	Group string
}

// Read implements Store.
func (k *KafkaStore) Read(ctx context.Context, parts []record.TopicPartition) (map[record.TopicPartition]Committed, error) {
	topics := map[string]bool{}
	var names []string
	for _, p := range parts {
		if !topics[p.Topic] {
			topics[p.Topic] = true
			names = append(names, p.Topic)
		}
	}
	rs, err := k.Admin.FetchOffsetsForTopics(ctx, k.Group, names...)
	if errors.Is(err, kerr.GroupIDNotFound) { // a group that never committed, on some brokers
		return map[record.TopicPartition]Committed{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", k.Group, err)
	}
	out := make(map[record.TopicPartition]Committed, len(parts))
	for _, p := range parts {
		r, ok := rs.Lookup(p.Topic, p.Partition)
		switch {
		case !ok:
		case r.Err != nil:
			return nil, fmt.Errorf("fetching the committed offset of group %q on %s: %w", k.Group, p, r.Err)
		case r.At >= 0:
			out[p] = Committed{Offset: r.At, Metadata: r.Metadata, StoredIn: "kafka"}
		}
	}
	return out, nil
}

// Write implements Store: one OffsetCommit of the group, which Kafka
// applies per partition; a partition it refuses is an error naming it.
func (k *KafkaStore) Write(ctx context.Context, changes []Change, check func(context.Context) error) error {
	if err := check(ctx); err != nil {
		return err
	}
	os := make(kadm.Offsets)
	for _, c := range changes {
		os.Add(kadm.Offset{Topic: c.Topic, Partition: c.Partition.Partition, At: c.To, LeaderEpoch: -1, Metadata: c.ToMetadata})
	}
	if err := k.Admin.CommitAllOffsets(ctx, k.Group, os); err != nil {
		return fmt.Errorf("committing the offsets of group %q: %w", k.Group, err)
	}
	return nil
}

// StoredOffsets is a database that keeps a group's offsets in a table of
// its own (pgsink.Sink).
type StoredOffsets interface {
	// Offsets returns the stored offsets of parts; a partition without a
	// row is absent.
	Offsets(ctx context.Context, parts []record.TopicPartition) (map[record.TopicPartition]int64, error)
	// SetOffsets stores the offsets in one database transaction, calling
	// check before it commits and rolling back when check fails.
	SetOffsets(ctx context.Context, to map[record.TopicPartition]int64, check func(context.Context) error) error
}

// DatabaseStore is the offsets a database sink keeps (the truth, with
// such a sink), beside the group's committed offsets in Kafka, which the
// processor copies them to for lag tools and falls back to for a
// partition without a row.
type DatabaseStore struct {
	DB    StoredOffsets
	Name  string // what StoredIn says, e.g. "postgres"
	Kafka *KafkaStore
}

// Read implements Store: the database's offset where it has a row, else
// the group's, as the processor resumes.
func (d *DatabaseStore) Read(ctx context.Context, parts []record.TopicPartition) (map[record.TopicPartition]Committed, error) {
	out, err := d.Kafka.Read(ctx, parts)
	if err != nil {
		return nil, err
	}
	stored, err := d.DB.Offsets(ctx, parts)
	if err != nil {
		return nil, err
	}
	for tp, o := range stored {
		out[tp] = Committed{Offset: o, StoredIn: d.Name}
	}
	return out, nil
}

// Write implements Store: the database's rows in one transaction (check
// runs before it commits), then the same offsets to the group in Kafka,
// so that the copy lag tools read agrees. The database is the truth: if
// the copy fails, the processor still resumes from the rows, and the
// error says so.
func (d *DatabaseStore) Write(ctx context.Context, changes []Change, check func(context.Context) error) error {
	to := make(map[record.TopicPartition]int64, len(changes))
	for _, c := range changes {
		to[c.TopicPartition()] = c.To
	}
	if err := d.DB.SetOffsets(ctx, to, check); err != nil {
		return err
	}
	copies := make([]Change, len(changes))
	for i, c := range changes {
		c.ToMetadata = "" // the database keeps no metadata: none known
		copies[i] = c
	}
	noCheck := func(context.Context) error { return nil }
	if err := d.Kafka.Write(ctx, copies, noCheck); err != nil {
		return fmt.Errorf("the %s offsets were reset, but copying them to the group failed (lag tools read the old ones until the processor commits): %w", d.Name, err)
	}
	return nil
}
