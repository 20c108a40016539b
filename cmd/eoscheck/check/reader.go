package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Source says which cluster, topics and group a Reader audits.
type Source struct {
	Brokers []string // seed brokers, host:port
	Inputs  []string // the processor's input topics
	// Outputs are the topics it writes; Read needs them, ReadInputs (a
	// run into PostgreSQL, which has none) does not.
	Outputs []string
	Group   string // its consumer group
	// DeadLetters are dead-letter topics (PROCESSOR_DLQ_TOPIC) to read;
	// optional. Each dead letter a read_committed reader sees is a
	// dead-letter anomaly, but for an input whose mark says it fails.
	DeadLetters []string
	// Poison: the inputs hold the fault drill's marked records (MarkOf):
	// Read and ReadInputs return their marks.
	Poison bool
	// Aggregate: the processor ran the aggregate transform counting by
	// record key: Read keeps every output's count (Output.Count) and every
	// input's key (Run.InputKeys), for Options.Aggregate.
	Aggregate bool
	// Windows: the processor ran a windowed count with EMIT=close: Read
	// keeps every output's count (ParseWindowCount) and every input's key
	// and timestamp (Run.InputKeys, Run.InputTimes), for Options.Windows.
	Windows bool
	// Dedupe: the processor ran a dedupe by GroupBy: Read keeps every
	// input's id (GroupPath.Key of its value) and timestamp
	// (Run.InputKeys, Run.InputTimes), for Options.Dedupe.
	Dedupe bool
	// GroupBy, with Aggregate: the counts were grouped by this member of
	// the input values (Options.GroupBy): Run.InputKeys holds each
	// input's group key (GroupPath.Key) in place of its record key.
	GroupBy GroupPath
	// ReplayGroup, with DeadLetters, is the consumer group of `processor
	// replay`: Read returns its committed offsets on the dead-letter
	// topics (Run.Replayed), and the dead letters below them count as
	// replayed, not as dead letters.
	ReplayGroup string
	// Join: the processor ran the join transform: Read keeps every
	// input's lookup key (its record key, or GroupBy of its value:
	// Run.InputKeys) and every output's row at JoinInto (Output.Row),
	// and reads the committed records of JoinTable (Run.Table), for
	// Options.Join.
	Join      bool
	JoinTable string
	JoinInto  GroupPath
}

// Reader reads a processor run from Kafka into the checker's model. It only
// reads: it joins no group and commits nothing.
type Reader struct {
	src  Source
	opts []kgo.Opt
	cl   *kgo.Client
	adm  *kadm.Client
}

// NewReader returns a Reader for src; opts are extra client options (TLS,
// SASL, logging) used by every client it creates. It does not connect.
func NewReader(src Source, opts ...kgo.Opt) (*Reader, error) {
	if len(src.Brokers) == 0 || len(src.Inputs) == 0 || src.Group == "" {
		return nil, errors.New("brokers, input topics and group are all required")
	}
	opts = append([]kgo.Opt{kgo.SeedBrokers(src.Brokers...)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &Reader{src: src, opts: opts, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close closes the Reader's client.
func (r *Reader) Close() { r.cl.Close() }

// Ping checks that a broker answers and that every input, output and
// dead-letter topic exists.
func (r *Reader) Ping(ctx context.Context) error {
	if err := r.cl.Ping(ctx); err != nil {
		return fmt.Errorf("cannot reach brokers %s: %w", strings.Join(r.src.Brokers, ","), err)
	}
	all := r.topics()
	tds, err := r.adm.ListTopics(ctx, all...)
	if err != nil {
		return fmt.Errorf("listing topics: %w", err)
	}
	for _, t := range all {
		td, ok := tds[t]
		switch {
		case !ok, errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			return fmt.Errorf("topic %q does not exist", t)
		case td.Err != nil:
			return fmt.Errorf("topic %q: %w", t, td.Err)
		}
	}
	return nil
}

func (r *Reader) topics() []string {
	return slices.Concat(r.src.Inputs, r.src.Outputs, r.src.DeadLetters)
}

// Sample takes one observation: the last stable offset and high watermark
// of every input, output and dead-letter partition, and the group's
// committed offsets.
// Partitions whose offsets could not be listed are left out.
func (r *Reader) Sample(ctx context.Context) (Sample, error) {
	s := Sample{At: time.Now()}
	// The stable offset first: every transaction decided below it has its
	// marker below the high watermark taken after it.
	st, err := r.adm.ListCommittedOffsets(ctx, r.topics()...)
	if err != nil && len(st) == 0 {
		return s, fmt.Errorf("listing last stable offsets: %w", err)
	}
	hw, err := r.adm.ListEndOffsets(ctx, r.topics()...)
	if err != nil && len(hw) == 0 {
		return s, fmt.Errorf("listing high watermarks: %w", err)
	}
	s.Stable, s.High = listed(st), listed(hw)
	if s.Committed, err = r.committed(ctx); err != nil {
		return s, err
	}
	return s, nil
}

// Watch samples every interval for d (d = 0: one sample). A failed sample
// is skipped; Watch fails only when no sample succeeded or ctx ends.
func (r *Reader) Watch(ctx context.Context, d, every time.Duration) ([]Sample, error) {
	var out []Sample
	var lastErr error
	end := time.Now().Add(d)
	for {
		s, err := r.Sample(ctx)
		if err != nil {
			lastErr = err
		} else {
			out = append(out, s)
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		left := time.Until(end)
		if left <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(min(every, left)):
		}
	}
	if len(out) == 0 {
		return nil, lastErr
	}
	return out, nil
}

func listed(l kadm.ListedOffsets) map[record.TopicPartition]int64 {
	m := map[record.TopicPartition]int64{}
	l.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Partition >= 0 {
			m[record.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	})
	return m
}

// committed returns the group's committed offsets on the input topics.
func (r *Reader) committed(ctx context.Context) (map[record.TopicPartition]int64, error) {
	return r.groupOffsets(ctx, r.src.Group, r.src.Inputs)
}

// groupOffsets returns group's committed offsets on topics.
func (r *Reader) groupOffsets(ctx context.Context, group string, topics []string) (map[record.TopicPartition]int64, error) {
	resp, err := r.adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetching offsets of group %q: %w", group, err)
	}
	if err := resp.Error(); err != nil {
		return nil, fmt.Errorf("fetching offsets of group %q: %w", group, err)
	}
	m := map[record.TopicPartition]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 && slices.Contains(topics, o.Topic) {
			m[record.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.At
		}
	})
	return m, nil
}

// ends lists the log start, last stable and high watermark offsets of
// every partition of topics; any partition error fails.
func (r *Reader) ends(ctx context.Context, topics []string) (start, stable, high map[record.TopicPartition]int64, err error) {
	get := func(what string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[record.TopicPartition]int64, error) {
		l, err := list(ctx, topics...)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s of %s: %w", what, strings.Join(topics, ","), err)
		}
		return listed(l), nil
	}
	if start, err = get("start offsets", r.adm.ListStartOffsets); err != nil {
		return
	}
	if stable, err = get("last stable offsets", r.adm.ListCommittedOffsets); err != nil {
		return
	}
	high, err = get("end offsets", r.adm.ListEndOffsets)
	return
}
