// Package kafkatest gives tests a Kafka cluster to run against and the
// reads and writes they check it with: an in-process kfake cluster that the
// test starts, over real TCP, or the Apache Kafka cluster named by
// PROCESSOR_TEST_BROKERS (make test-kafka sets it), on which tests use
// topic and group names of their own (Unique). The txn, pipeline and
// integration tests share it.
//
// Every function fails the test (t.Fatal) when the cluster does not answer
// within its deadline, with a message naming what it waited for, never by
// go test's global timeout. Call them from the test's goroutine.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokersVar names the variable holding the seed brokers of a real
// cluster to run against as well as kfake.
const BrokersVar = "PROCESSOR_TEST_BROKERS"

// Deadlines of the calls below.
const (
	adminTimeout   = 30 * time.Second // one admin request (topics, offsets)
	produceTimeout = 60 * time.Second // ProduceSync: every record acknowledged
	readTimeout    = 60 * time.Second // ReadAll: a topic read to its end
)

// Cluster is one cluster a test runs against.
type Cluster struct {
	// Name is "kfake" for a cluster NewFake started, "kafka" for the one
	// of PROCESSOR_TEST_BROKERS, or what New was given.
	Name    string
	Brokers []string
	// Fake is the kfake cluster, for injecting faults (ControlKey) and
	// reading its state; nil for a real cluster.
	Fake *kfake.Cluster
	// Conn are the options a client needs besides the seed brokers to
	// reach a secured cluster (TLS, SASL).
	Conn []kgo.Opt

	adminOnce sync.Once
	admin     *kadm.Client
	adminErr  error
}

// NewFake starts a kfake cluster of opts (by default kfake's: three
// brokers), closed when t ends.
func NewFake(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	f, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("starting a kfake cluster: %v", err)
	}
	t.Cleanup(f.Close)
	c := New(t, "kfake", f.ListenAddrs())
	c.Fake = f
	return c
}

// New is a cluster of brokers already running, reached with conn. Its
// admin client is closed when t ends.
func New(t testing.TB, name string, brokers []string, conn ...kgo.Opt) *Cluster {
	c := &Cluster{Name: name, Brokers: brokers, Conn: conn}
	t.Cleanup(func() {
		if c.admin != nil {
			c.admin.Close()
		}
	})
	return c
}

// FromEnv returns the cluster of PROCESSOR_TEST_BROKERS, named "kafka",
// or nil when the variable is not set.
func FromEnv(t testing.TB) *Cluster {
	b := os.Getenv(BrokersVar)
	if b == "" {
		return nil
	}
	return New(t, "kafka", strings.Split(b, ","))
}

// ForEach runs fn in a subtest "kfake" against a fresh kfake cluster of
// fake, and, when PROCESSOR_TEST_BROKERS is set, in a subtest "kafka"
// against that cluster too.
func ForEach(t *testing.T, fake []kfake.Opt, fn func(t *testing.T, c *Cluster)) {
	t.Helper()
	t.Run("kfake", func(t *testing.T) { fn(t, NewFake(t, fake...)) })
	if os.Getenv(BrokersVar) != "" {
		t.Run("kafka", func(t *testing.T) { fn(t, FromEnv(t)) })
	}
}

// Unique returns prefix with a random suffix, a topic or group name no
// earlier run used, so that tests can share a real cluster.
func Unique(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// ClientOpts are the options of a client of c: its seed brokers, how to
// reach them, then more.
func (c *Cluster) ClientOpts(more ...kgo.Opt) []kgo.Opt {
	return append(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.Conn...), more...)
}

// Client returns a client of c with more options, closed when t ends.
func (c *Cluster) Client(t testing.TB, more ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(c.ClientOpts(more...)...)
	if err != nil {
		t.Fatalf("a client of %s: %v", c.Name, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns c's admin client, one for the cluster's life, shared by
// the goroutines of its tests.
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	c.adminOnce.Do(func() {
		var cl *kgo.Client
		if cl, c.adminErr = kgo.NewClient(c.ClientOpts()...); c.adminErr == nil {
			c.admin = kadm.NewClient(cl)
		}
	})
	if c.adminErr != nil {
		t.Fatalf("an admin client of %s: %v", c.Name, c.adminErr)
	}
	return c.admin
}

// CreateTopics creates topics of partitions partitions and the broker's
// replication factor, with configs (e.g. max.message.bytes) or the
// broker's defaults, failing the test with the broker's answer.
func (c *Cluster) CreateTopics(t testing.TB, partitions int32, configs map[string]string, topics ...string) {
	t.Helper()
	var cfg map[string]*string
	if len(configs) > 0 {
		cfg = make(map[string]*string, len(configs))
		for k, v := range configs {
			cfg[k] = &v
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	resp, err := c.Admin(t).CreateTopics(ctx, partitions, -1, cfg, topics...)
	if err != nil {
		t.Fatalf("creating %v: %v", topics, err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("creating %s with %v: %v", r.Topic, configs, r.Err)
		}
	}
	// Kafka answers once its controller has the topics; a broker's
	// metadata may lag a moment behind, and a processor started then would
	// find no such topic.
	for {
		missing := c.unready(ctx, t, topics)
		if missing == "" {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("created %v, but the metadata did not show them ready within %s: %s", topics, adminTimeout, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unready returns what the cluster's metadata does not yet show of topics
// (a topic, or a partition's leader), or "" when it shows them all.
func (c *Cluster) unready(ctx context.Context, t testing.TB, topics []string) string {
	details, err := c.Admin(t).ListTopics(ctx, topics...)
	if err != nil {
		return err.Error()
	}
	for _, topic := range topics {
		d, ok := details[topic]
		switch {
		case !ok:
			return topic + ": not listed"
		case d.Err != nil:
			return topic + ": " + d.Err.Error()
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Sprintf("%s partition %d: no leader (%v)", topic, p.Partition, p.Err)
			}
		}
	}
	return ""
}

// EndOffsets returns topic's log-end offset (high watermark) per
// partition.
func (c *Cluster) EndOffsets(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	listed, err := c.Admin(t).ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("listing the end offsets of %s: %v", topic, err)
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends
}

// Committed returns group's committed offset per partition of topic;
// none for a group that has committed nothing yet. It asks for stable
// offsets (KIP-447's require_stable): Kafka answers a transaction's
// offset commit only once its commit marker has reached the group, a
// moment after EndTxn returned, and the broker tells the client to retry
// until then, so that a read right after a processor stopped sees what
// its last transaction committed.
func (c *Cluster) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(kadm.RequireStable(context.Background()), adminTimeout)
	defer cancel()
	m, err := c.committed(ctx, t, group, topic)
	if err != nil {
		t.Fatalf("fetching the offsets of group %s: %v", group, err)
	}
	return m
}

// committed fetches group's committed offsets of topic. A partition whose
// transaction's offsets are not yet stable (UNSTABLE_OFFSET_COMMIT: its
// commit marker has not reached the group) is asked again until it is or
// ctx ends; kadm reports that error per partition and does not retry it,
// so leaving such a partition out read as "nothing committed" right after
// a stop.
func (c *Cluster) committed(ctx context.Context, t testing.TB, group, topic string) (map[int32]int64, error) {
	for {
		m := map[int32]int64{}
		resp, err := c.Admin(t).FetchOffsets(ctx, group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		var unstable error
		for p, o := range resp[topic] {
			switch {
			case o.Err == nil:
				m[p] = o.At
			case errors.Is(o.Err, kerr.UnstableOffsetCommit):
				unstable = fmt.Errorf("partition %d: %w", p, o.Err)
			default:
				return nil, fmt.Errorf("partition %d: %w", p, o.Err)
			}
		}
		if unstable == nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", unstable, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// CaughtUp reports whether group's committed offsets reached the end of
// every partition of topic, and if not, which partitions are behind. An
// error of the cluster's counts as not caught up (the caller polls). On a
// transactional input topic the last offset is a commit marker: a
// processor commits past it once it has fetched it, and may be one below
// the end until then. An empty partition (end offset 0) with no committed
// offset is caught up: no record of it was there to process.
func (c *Cluster) CaughtUp(t testing.TB, group, topic string) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := c.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		return false, err.Error()
	}
	committed, err := c.committed(ctx, t, group, topic)
	if err != nil {
		return false, err.Error()
	}
	var behind []string
	ends.Each(func(o kadm.ListedOffset) {
		at, found := committed[o.Partition]
		if !found && o.Offset == 0 {
			return // an empty partition: nothing to commit (which keys land where depends on their bytes, e.g. a schema id)
		}
		if !found || at != o.Offset {
			behind = append(behind, fmt.Sprintf("p%d committed %d end %d", o.Partition, at, o.Offset))
		}
	})
	sort.Strings(behind)
	return len(behind) == 0, strings.Join(behind, ", ")
}

// ProduceSync writes recs with a client of more options (besides the
// cluster's), waits for every acknowledgement and returns recs, their
// partitions and offsets set.
func (c *Cluster) ProduceSync(t testing.TB, recs []*kgo.Record, more ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(c.ClientOpts(more...)...)
	if err != nil {
		t.Fatalf("a producer of %s: %v", c.Name, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records: %v", len(recs), err)
	}
	return recs
}

// ReadAll reads topic from its start to its current end offsets, as a
// read_committed (committed) or read_uncommitted consumer sees it, and
// returns its data records. Control records (transaction markers) are
// read so that positions reach the end offsets, and not returned. A
// transaction still open holds a read_committed reader back: then the
// read fails at its deadline.
func (c *Cluster) ReadAll(t testing.TB, topic string, committed bool) []*kgo.Record {
	t.Helper()
	ends := c.EndOffsets(t, topic)
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	cl, err := kgo.NewClient(c.ClientOpts(kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())...)
	if err != nil {
		t.Fatalf("a consumer of %s: %v", c.Name, err)
	}
	defer cl.Close()
	pos := map[int32]int64{}
	done := func() bool {
		for p, end := range ends {
			if pos[p] < end {
				return false
			}
		}
		return true
	}
	var out []*kgo.Record
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: timed out after %s with %d records at %v of %v (an open transaction holds back read_committed)", topic, readTimeout, len(out), pos, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}
