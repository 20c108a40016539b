package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/sample"
)

// kafkaAddr is the project's single Apache Kafka broker
// (integration/kafka/kafka.sh up).
const kafkaAddr = "127.0.0.1:19092"

// broker is the cluster the benchmark runs on.
type broker struct {
	addrs    []string
	describe string
	kind     string // kafka, kfake or external
	cl       *kgo.Client
	adm      *kadm.Client
	dev      *launch.Process // the devbroker this command started, if any
	devDir   string          // and its data
}

// openBroker picks the broker: -brokers if given; with -broker auto the
// project's Apache Kafka if it answers on 127.0.0.1:19092, else a kfake
// devbroker process started here (and stopped by close); -broker kafka
// starts Apache Kafka with kafka.sh up (and leaves it running).
func openBroker(ctx context.Context, o options, env *environment) (*broker, error) {
	b := &broker{}
	switch {
	case o.brokers != "":
		b.addrs, b.kind = strings.Split(o.brokers, ","), "external"
		b.describe = "external brokers " + o.brokers + " (-brokers)"
	case o.broker == "kafka":
		out, err := exec.CommandContext(ctx, "bash", "integration/kafka/kafka.sh", "up").Output()
		if err != nil {
			return nil, fmt.Errorf("integration/kafka/kafka.sh up: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		b.addrs, b.kind = []string{lines[len(lines)-1]}, "kafka"
		b.describe = "Apache Kafka 4.4.0 at " + b.addrs[0] + " (integration/kafka/kafka.sh; left running)"
	case o.broker == "auto" && dials(kafkaAddr):
		b.addrs, b.kind = []string{kafkaAddr}, "kafka"
		b.describe = "Apache Kafka 4.4.0 at " + kafkaAddr + " (integration/kafka/kafka.sh, already running" + kafkaJIT() + ")"
	case o.broker == "auto" || o.broker == "kfake":
		if err := b.startDevbroker(env); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("-broker must be auto, kafka or kfake, not %q", o.broker)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		b.close()
		return nil, err
	}
	b.cl, b.adm = cl, kadm.NewClient(cl)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if err = cl.Ping(pctx); err == nil {
			return b, nil
		}
		if pctx.Err() != nil {
			b.close()
			return nil, fmt.Errorf("the broker at %s does not answer: %w", strings.Join(b.addrs, ","), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kafkaJIT says how the running Apache Kafka's JVM compiles, which decides
// much of its throughput: kafka.sh starts it with the C1-only JIT unless
// KAFKA_JVM_PERFORMANCE_OPTS says otherwise. It looks for the single
// broker's process (kafka.Kafka with a .../single/server.properties) in
// /proc, wherever it was started from.
func kafkaJIT() string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte("\x00kafka.Kafka\x00")) ||
			!bytes.Contains(cmdline, []byte("/single/server.properties")) {
			continue
		}
		var heap string
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if bytes.HasPrefix(a, []byte("-Xmx")) {
				heap = ", heap " + string(a[4:])
			}
		}
		if bytes.Contains(cmdline, []byte("TieredStopAtLevel=1")) {
			return ", C1-only JIT" + heap
		}
		return ", full JIT" + heap
	}
	return ""
}

func dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// startDevbroker starts bin/devbroker (kfake) on a free loopback port with
// a fresh data directory under bench/.cache.
func (b *broker) startDevbroker(env *environment) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	l.Close()
	dir := filepath.Join(env.cache, "devbroker")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := launch.Start(context.Background(), launch.Command{
		Path: env.devbroker, Args: []string{"-addr", addr, "-dir", dir, "-partitions", "6"},
		Log: filepath.Join(env.logs, "devbroker.log"), Truncate: true, Stdout: true, OwnGroup: true,
	})
	if err != nil {
		return fmt.Errorf("bin/devbroker: %w", err)
	}
	b.dev, b.devDir = p, dir
	b.addrs, b.kind = []string{addr}, "kfake"
	b.describe = "kfake (franz-go's Kafka-protocol broker) in a bin/devbroker process at " + addr +
		", started for this run: Apache Kafka did not answer on " + kafkaAddr
	return nil
}

// close stops the devbroker if this command started it; an Apache Kafka
// broker is left as it was.
func (b *broker) close() {
	if b.cl != nil {
		b.cl.Close()
	}
	if b.dev != nil {
		b.dev.Stop(syscall.SIGTERM, 20*time.Second)
		_ = os.RemoveAll(b.devDir)
	}
}

// createTopics creates the topics with the given partitions, replication
// factor 1 (both brokers here have one node).
func (b *broker) createTopics(ctx context.Context, partitions int, topics ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := b.adm.CreateTopics(ctx, int32(partitions), 1, nil, topics...)
	if err != nil {
		return fmt.Errorf("creating topics %v: %w", topics, err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %s: %w", r.Topic, r.Err)
		}
	}
	// Wait until every partition has a leader, so that the first client
	// does not spend its time on retries.
	for {
		md, err := b.adm.Metadata(ctx, topics...)
		if err == nil {
			ready := true
			for _, t := range topics {
				td, ok := md.Topics[t]
				if !ok || td.Err != nil || len(td.Partitions) != partitions {
					ready = false
					break
				}
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 {
						ready = false
					}
				}
			}
			if ready {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("topics %v have no leaders: %w", topics, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createCompacted creates topic with cleanup.policy=compact, as a table
// topic is.
func (b *broker) createCompacted(ctx context.Context, partitions int, topic string) error {
	compact := "compact"
	resp, err := b.adm.CreateTopics(ctx, int32(partitions), 1, map[string]*string{"cleanup.policy": &compact}, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating table topic %s: %w", topic, err)
	}
	return nil
}

// input is a pre-loaded input topic.
type input struct {
	topic   string
	size    int
	records int
	bytes   int64           // keys and values
	ends    map[int32]int64 // end offset of each partition

	format string                    // "" for JSON, avroFormat for Avro
	gen    func(n int64) *kgo.Record // the n-th record, when not sample.Order's JSON
	avro   *input                    // of a JSON input: its Avro twin, if the Avro rows run
	// single is the same records in a topic of one partition, for the
	// systems with onePartition; nil when none runs.
	single *input
	// table is the customers table topic of the join rows; "" when none
	// runs.
	table string
}

// record is the input's n-th record: sample.Order's JSON order, or
// in.gen's.
func (in *input) record(n int64) *kgo.Record {
	if in.gen != nil {
		return in.gen(n)
	}
	return sample.Order(n, customers, in.size)
}

// customers is the number of customer keys of the input's orders.
const customers = 1000

// of returns the input a system of the format reads: in, or its Avro
// twin.
func (in *input) of(format string) *input {
	if format == avroFormat {
		return in.avro
	}
	return in
}

// preload writes in.records order events padded to in.size bytes (JSON,
// or encoded by in.gen) with a plain (idempotent, non-transactional)
// franz-go producer; each record's timestamp is the time it was produced.
func (b *broker) preload(ctx context.Context, in *input) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.DefaultProduceTopic(in.topic),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000),
		kgo.MetadataMinAge(250*time.Millisecond)) // a new topic's first metadata may lack leaders
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	for i := range in.records {
		r := in.record(int64(i))
		in.bytes += int64(len(r.Key) + len(r.Value))
		cl.Produce(ctx, r, promise)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		return fmt.Errorf("pre-loading %s: %w", in.topic, err)
	}
	if e := failed.Load(); e != nil {
		return fmt.Errorf("pre-loading %s: %w", in.topic, *e)
	}
	ends, err := b.adm.ListEndOffsets(ctx, in.topic)
	if err != nil {
		return err
	}
	in.ends = map[int32]int64{}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		in.ends[o.Partition] = o.Offset
		total += o.Offset
	})
	if total != int64(in.records) {
		return fmt.Errorf("pre-loading %s: the end offsets add up to %d, not %d", in.topic, total, in.records)
	}
	return nil
}

// benchGroup matches the groups that bench/run names (bench-<date>-<time>-...).
var benchGroup = regexp.MustCompile(`^bench-[0-9]{8}-[0-9]{6}-`)

// sweepGroups deletes the benchmark's groups that are empty, left by
// earlier runs: Kafka Streams does not leave its group when it closes, so
// its group can be deleted only once the member's session has timed out
// (45 s), after the run that used it is over. Groups of a benchmark
// running elsewhere at the same time are empty only between its runs, so
// deleting them is harmless.
func (b *broker) sweepGroups(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	listed, err := b.adm.ListGroups(ctx, "Empty")
	if err != nil {
		return
	}
	var old []string
	for _, g := range listed.Sorted() {
		if benchGroup.MatchString(g.Group) {
			old = append(old, g.Group)
		}
	}
	if len(old) > 0 {
		_, _ = b.adm.DeleteGroups(ctx, old...)
	}
}

// cleanup deletes groups and topics that this run created. A group that
// cannot be deleted yet (a member that did not leave) is left for
// sweepGroups.
func (b *broker) cleanup(ctx context.Context, topics, groups []string) {
	if len(groups) > 0 {
		_, _ = b.adm.DeleteGroups(ctx, groups...)
	}
	for len(topics) > 0 {
		n := min(len(topics), 50)
		if _, err := b.adm.DeleteTopics(ctx, topics[:n]...); err != nil {
			say("cleanup: deleting topics: %v", err)
		}
		topics = topics[n:]
	}
}

// withInternal adds to topics the ones named after group that exist (the
// repartition topics of the processor and of Kafka Streams, Kafka
// Streams' changelogs), so that a run's cleanup deletes them too.
func (b *broker) withInternal(ctx context.Context, group string, topics []string) []string {
	out := slices.Clone(topics)
	tds, err := b.adm.ListTopics(ctx)
	if err != nil {
		return out
	}
	for _, t := range tds.Sorted() {
		if strings.HasPrefix(t.Topic, group+"-") && !slices.Contains(out, t.Topic) {
			out = append(out, t.Topic)
		}
	}
	return out
}
