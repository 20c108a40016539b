// Command copier is the baseline of `make bench`: the least code that copies
// the records of the input topics to an output topic exactly once with
// franz-go's GroupTransactSession. It polls, produces each record (key,
// value, headers and timestamp unchanged) to the output in the open
// transaction, and ends the transaction every commit interval, committing
// the consumed offsets in it. Everything else is franz-go's default but the
// metadata age (see below), which the processor sets the same way. SIGTERM
// ends the open transaction and exits 0.
//
//	copier -brokers 127.0.0.1:19092 -group g -topics in -out out -commit-interval 100ms
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// config is the command line.
type config struct {
	brokers, group, topics, out, txnID string
	instance                           string // static group member ID; "" for a dynamic member
	interval                           time.Duration
}

// startHooks run after the flags are parsed (pprof.go, build tag pprof).
var startHooks []func()

func main() {
	c := parseFlags()
	for _, h := range startHooks {
		h()
	}
	s, err := newSession(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "copier:", err)
		os.Exit(2)
	}
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cp := &copier{s: s, out: c.out}
	for ctx.Err() == nil {
		if err := cp.transaction(ctx, time.Now().Add(c.interval)); err != nil {
			fmt.Fprintln(os.Stderr, "copier:", err)
			os.Exit(1)
		}
	}
}

// parseFlags parses and checks the command line; a usage error exits 2.
func parseFlags() config {
	var c config
	flag.StringVar(&c.brokers, "brokers", "127.0.0.1:19092", "comma-separated seed brokers")
	flag.StringVar(&c.group, "group", "", "consumer group")
	flag.StringVar(&c.topics, "topics", "", "comma-separated input topics")
	flag.StringVar(&c.out, "out", "", "output topic")
	flag.StringVar(&c.txnID, "txn-id", "", "transactional ID (default <group>-copier)")
	flag.StringVar(&c.instance, "instance-id", "", "static group member ID (KIP-345): a restart gets its partitions back at once; dynamic when empty")
	flag.DurationVar(&c.interval, "commit-interval", 100*time.Millisecond, "how long a transaction stays open")
	flag.Parse()
	if c.group == "" || c.topics == "" || c.out == "" || c.interval <= 0 {
		fmt.Fprintln(os.Stderr, "copier: -group, -topics, -out and a positive -commit-interval are required")
		os.Exit(2)
	}
	if c.txnID == "" {
		c.txnID = c.group + "-copier"
	}
	return c
}

// newSession opens the GroupTransactSession: read_committed from the
// start of the input, a static member with -instance-id, franz-go's
// defaults otherwise.
func newSession(c config) (*kgo.GroupTransactSession, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(c.brokers, ",")...),
		kgo.ConsumerGroup(c.group),
		kgo.ConsumeTopics(strings.Split(c.topics, ",")...),
		kgo.TransactionalID(c.txnID),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// franz-go retries a produce refused with CONCURRENT_TRANSACTIONS
		// (the previous transaction's markers are still being written)
		// after a metadata refresh, at most every MetadataMinAge: 5 s by
		// default, which would stall the transaction after each commit.
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	if c.instance != "" {
		opts = append(opts, kgo.InstanceID(c.instance))
	}
	return kgo.NewGroupTransactSession(opts...)
}
