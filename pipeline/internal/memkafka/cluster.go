// Package memkafka is a Kafka cluster in memory and a group session on it
// that implements pipeline.Session and pipeline.Observer with the
// session's semantics as the loop sees them: an abort rewinds to the
// committed offsets, a failed output aborts the commit and is named by
// TakeFailures, a topic the cluster lacks fails its outputs. It is the one
// session in memory: the loop's own tests run on it, and
// pipeline/pipelinetest drives a chain through the real loop with it. It
// imports nothing of pipeline, so that the loop's internal tests can use
// it.
package memkafka

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The states of a record in a topic.
const (
	open = iota
	committed
	aborted
)

// stored is one record of a partition, and its transaction's state.
type stored struct {
	r     *kgo.Record
	state int
}

// at is where a record is stored: its topic, partition and index there.
type at struct {
	topic string
	part  int32
	i     int
}

// topic is a topic: its partitions and its max.message.bytes (0: no
// limit).
type topic struct {
	parts [][]stored
	limit int
}

// Cluster is a cluster in memory: topics of partitions of records, each
// with the state of its transaction, and the groups' committed offsets.
// Safe for concurrent use.
type Cluster struct {
	mu     sync.Mutex
	topics map[string]*topic
	groups map[string]map[string]map[int32]int64 // group -> topic -> partition -> next offset
	// changed is closed and replaced at every change: a record stored,
	// a transaction ended, a session waiting for records.
	changed chan struct{}
	// size is what a record counts against a topic's limit; nil: limits
	// are not enforced.
	size func(*kgo.Record) int
	// oneBatch: the outputs of a transaction to one partition travel in
	// one batch, which is refused as a whole when one of them is larger
	// than the topic's limit (a lingering producer on a real broker).
	oneBatch bool
	// autoCreate: an output to a topic the cluster lacks creates it,
	// with one partition, rather than failing.
	autoCreate bool
}

// NewCluster returns an empty cluster; size is what a record counts
// against a topic's limit (nil: limits are not enforced).
func NewCluster(size func(*kgo.Record) int) *Cluster {
	return &Cluster{topics: map[string]*topic{}, groups: map[string]map[string]map[int32]int64{},
		changed: make(chan struct{}), size: size}
}

// OneBatch makes the outputs of a transaction to one partition travel in
// one batch, refused as a whole when one of them is over the topic's
// limit. Call it before any session runs.
func (c *Cluster) OneBatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.oneBatch = true
}

// AutoCreate makes an output to a topic the cluster lacks create it, with
// one partition, rather than fail. Call it before any session runs.
func (c *Cluster) AutoCreate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.autoCreate = true
}

// Create makes topic with partitions partitions and limit (0: none); it
// replaces a topic of that name.
func (c *Cluster) Create(name string, partitions int, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.topics[name] = &topic{parts: make([][]stored, partitions), limit: limit}
}

// Has reports whether the cluster has topic name.
func (c *Cluster) Has(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topics[name] != nil
}

// Partitions is how many partitions topic name has (0: no such topic).
func (c *Cluster) Partitions(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.topics[name]; t != nil {
		return len(t.parts)
	}
	return 0
}

// Changed returns a channel closed at the next change.
func (c *Cluster) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// changedLocked wakes whoever waits for a change.
func (c *Cluster) changedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// partitionFor is where a record with key goes in a topic of n
// partitions: by the key's hash, or the first partition without a key.
func partitionFor(key []byte, n int) int32 {
	if key == nil || n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// endOf is the offset after a partition's last record.
func endOf(part []stored) int64 {
	if len(part) == 0 {
		return 0
	}
	return part[len(part)-1].r.Offset + 1
}

// appendLocked stores a copy of r in its topic, partitioned by key, and
// sets r's partition and offset, as a producer does.
func (c *Cluster) appendLocked(r *kgo.Record, state int) at {
	t := c.topics[r.Topic]
	r.Partition = partitionFor(r.Key, len(t.parts))
	part := t.parts[r.Partition]
	r.Offset = endOf(part)
	t.parts[r.Partition] = append(part, stored{r: Clone(r), state: state})
	return at{r.Topic, r.Partition, len(part)}
}

// ProduceInputs stores recs, committed and stamped now, in their topics,
// partitioned by key, and sets their partitions and offsets.
func (c *Cluster) ProduceInputs(recs []*kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		r.Timestamp = time.Now()
		c.appendLocked(r, committed)
	}
	c.changedLocked()
}

// Append stores r, committed, in the partition it names, at its offset or
// at the partition's end when that is further (a log may skip offsets, as
// a compacted or transactional one does), and sets r's offset; a zero
// timestamp becomes now. The topic and partition must exist.
func (c *Cluster) Append(r *kgo.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.topics[r.Topic]
	if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.parts) {
		return fmt.Errorf("memkafka: no partition %d of topic %q", r.Partition, r.Topic)
	}
	part := t.parts[r.Partition]
	r.Offset = max(r.Offset, endOf(part))
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	t.parts[r.Partition] = append(part, stored{r: Clone(r), state: committed})
	c.changedLocked()
	return nil
}

// Read returns topic's records: committed ones only, or every one
// (read_uncommitted: open and aborted ones too).
func (c *Cluster) Read(name string, committedOnly bool) []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*kgo.Record
	if t := c.topics[name]; t != nil {
		for _, part := range t.parts {
			for _, m := range part {
				if !committedOnly || m.state == committed {
					out = append(out, Clone(m.r))
				}
			}
		}
	}
	return out
}

// End is the offset after the last record of topic's partition.
func (c *Cluster) End(name string, partition int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.topics[name]; t != nil && int(partition) < len(t.parts) {
		return endOf(t.parts[partition])
	}
	return 0
}

// Committed returns group's committed offsets of topic.
func (c *Cluster) Committed(group, name string) map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneOffsets(c.groups[group][name])
}

// cloneOffsets copies m, never nil.
func cloneOffsets(m map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Clone copies what a broker keeps of r.
func Clone(r *kgo.Record) *kgo.Record {
	c := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)})
	}
	return c
}
