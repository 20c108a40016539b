// Command loadgen writes sample order events to a Kafka topic: JSON values
// keyed by customer, so per-key order can be checked downstream. make run
// uses it to feed the processor, and the benchmarks reuse it.
//
//	loadgen -brokers 127.0.0.1:9092 -topic orders -rate 1000
//
// With -records 0 it runs until interrupted. It waits for the brokers to
// answer, so it can start together with them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/sample"
)

func main() {
	var (
		brokers = flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
		topic   = flag.String("topic", "orders", "topic to write to")
		records = flag.Int64("records", 0, "records to write; 0 writes until interrupted")
		rate    = flag.Int("rate", 1000, "records per second; 0 writes as fast as possible")
		keys    = flag.Int("keys", 1000, "distinct customer keys")
		size    = flag.Int("size", 0, "pad each value to at least this many bytes")
		wait    = flag.Duration("wait", time.Minute, "how long to wait for the brokers to answer")
	)
	flag.Parse()
	if *keys < 1 || *rate < 0 || *records < 0 || *size < 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -keys must be at least 1; -rate, -records and -size must not be negative")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.DefaultProduceTopic(*topic),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	defer cl.Close()
	if err := waitForBrokers(ctx, cl, *wait); err != nil {
		log.Error("brokers did not answer", "brokers", *brokers, "err", err.Error())
		os.Exit(1)
	}

	var failed atomic.Int64
	var firstErr atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	start := time.Now()
	var interval time.Duration
	if *rate > 0 {
		interval = time.Second / time.Duration(*rate)
	}
	next := start
	lastLog := start
	var n int64
	for ; *records == 0 || n < *records; n++ {
		if ctx.Err() != nil {
			break
		}
		if interval > 0 {
			next = next.Add(interval)
			if d := time.Until(next); d > time.Millisecond {
				time.Sleep(d)
			}
		}
		cl.Produce(context.Background(), sample.Order(n, *keys, *size), promise)
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			log.Info("loadgen progress", "written", n+1, "per_sec", int(float64(n+1)/time.Since(start).Seconds()))
		}
	}
	flushFor := 30 * time.Second
	if ctx.Err() != nil {
		flushFor = 3 * time.Second // interrupted: the brokers may be going away too
	}
	fctx, cancel := context.WithTimeout(context.Background(), flushFor)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		log.Error("flushing", "err", err.Error())
		os.Exit(1)
	}
	if f := failed.Load(); f > 0 {
		log.Error("some records were not written", "failed", f, "first_err", (*firstErr.Load()).Error())
		os.Exit(1)
	}
	secs := time.Since(start).Seconds()
	log.Info("loadgen done", "written", n, "seconds", fmt.Sprintf("%.1f", secs), "per_sec", int(float64(n)/secs))
}

// waitForBrokers pings until a broker answers or the wait is over.
func waitForBrokers(ctx context.Context, cl *kgo.Client, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := cl.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return errors.Join(errors.New("gave up waiting"), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
