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
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:19092", "comma-separated seed brokers")
	group := flag.String("group", "", "consumer group")
	topics := flag.String("topics", "", "comma-separated input topics")
	out := flag.String("out", "", "output topic")
	txnID := flag.String("txn-id", "", "transactional ID (default <group>-copier)")
	interval := flag.Duration("commit-interval", 100*time.Millisecond, "how long a transaction stays open")
	flag.Parse()
	if *group == "" || *topics == "" || *out == "" || *interval <= 0 {
		fmt.Fprintln(os.Stderr, "copier: -group, -topics, -out and a positive -commit-interval are required")
		os.Exit(2)
	}
	if *txnID == "" {
		*txnID = *group + "-copier"
	}
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(strings.Split(*topics, ",")...),
		kgo.TransactionalID(*txnID),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// franz-go retries a produce refused with CONCURRENT_TRANSACTIONS
		// (the previous transaction's markers are still being written)
		// after a metadata refresh, at most every MetadataMinAge: 5 s by
		// default, which would stall the transaction after each commit.
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "copier:", err)
		os.Exit(2)
	}
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	for ctx.Err() == nil {
		deadline := time.Now().Add(*interval)
		began := false
		for ctx.Err() == nil && time.Now().Before(deadline) {
			// At most 10,000 records a poll, so that the deadline is
			// checked between polls: on a backlog, one poll could
			// otherwise return everything fetched so far, hundreds of
			// megabytes, and hold the transaction open far longer.
			pctx, cancel := context.WithDeadline(ctx, deadline)
			fs := s.PollRecords(pctx, 10_000)
			cancel()
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					fmt.Fprintf(os.Stderr, "copier: fetching %s/%d: %v\n", t, p, err)
				}
			})
			if fs.NumRecords() == 0 {
				continue
			}
			if !began {
				if err := s.Begin(); err != nil {
					fmt.Fprintln(os.Stderr, "copier: beginning a transaction:", err)
					os.Exit(1)
				}
				began = true
			}
			fs.EachRecord(func(r *kgo.Record) {
				r.Topic = *out
				s.Produce(context.Background(), r, promise)
			})
		}
		if !began {
			continue
		}
		how := kgo.TryCommit
		if e := failed.Swap(nil); e != nil {
			fmt.Fprintln(os.Stderr, "copier: a produce failed, aborting:", *e)
			how = kgo.TryAbort
		}
		ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := s.End(ectx, how); err != nil {
			cancel()
			fmt.Fprintln(os.Stderr, "copier: ending a transaction:", err)
			os.Exit(1)
		}
		cancel()
	}
}
