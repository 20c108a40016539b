// Command loadgen writes sample order events to a Kafka topic: JSON values
// keyed by customer, so per-key order can be checked downstream. make run
// uses it to feed the processor, and the benchmarks reuse it.
//
//	loadgen -brokers 127.0.0.1:9092 -topic orders -rate 1000
//
// With -records 0 it runs until interrupted. It waits for the brokers to
// answer, so it can start together with them.
//
// With -format avro it writes the orders of examples/avro instead
// (sample.OrderSchema) in the Schema Registry wire format: it registers
// the schema under <topic>-value at -schema-registry first (waiting for
// the registry as for the brokers) and encodes every order with it.
//
//	loadgen -topic orders -format avro -schema-registry http://127.0.0.1:8081
//
// With -read N it writes nothing: it reads the first N committed records
// of -topic and prints their values, one JSON document a line (Avro
// values decoded by their schema ids when -format is avro), then exits.
//
//	loadgen -topic orders-enriched -format avro -read 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/internal/interrupt"
	"github.com/streamproc/processor/internal/sample"
)

// config is the command line.
type config struct {
	brokers, topic string
	records        int64
	rate, keys     int
	size           int
	wait           time.Duration
	format         string // json or avro
	registry       string // the Schema Registry's URL, for -format avro
	read           int    // records to read and print instead of writing; 0 writes
}

func main() {
	c := parseFlags()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := interrupt.Context()
	defer stop()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(c.brokers, ",")...),
		kgo.DefaultProduceTopic(c.topic),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	defer cl.Close()
	if err := waitForBrokers(ctx, cl, c.wait); err != nil {
		log.Error("brokers did not answer", "brokers", c.brokers, "err", err.Error())
		os.Exit(1)
	}
	if c.read > 0 {
		cl.Close()
		if err := read(ctx, c, os.Stdout); err != nil {
			log.Error("reading", "topic", c.topic, "err", err.Error())
			os.Exit(1)
		}
		return
	}
	gen := func(n int64) *kgo.Record { return sample.Order(n, c.keys, c.size) }
	if c.format == "avro" {
		if gen, err = avroOrders(ctx, c, log); err != nil {
			log.Error("the order schema", "registry", c.registry, "err", err.Error())
			os.Exit(1)
		}
	}
	w := &writer{cl: cl, log: log, gen: gen}
	start := time.Now()
	n := w.write(ctx, c, start)
	if !w.finish(ctx) {
		os.Exit(1)
	}
	secs := time.Since(start).Seconds()
	log.Info("loadgen done", "written", n, "seconds", fmt.Sprintf("%.1f", secs), "per_sec", int(float64(n)/secs))
}

// parseFlags parses and checks the command line; a usage error exits 2.
func parseFlags() config {
	var c config
	flag.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flag.StringVar(&c.topic, "topic", "orders", "topic to write to")
	flag.Int64Var(&c.records, "records", 0, "records to write; 0 writes until interrupted")
	flag.IntVar(&c.rate, "rate", 1000, "records per second; 0 writes as fast as possible")
	flag.IntVar(&c.keys, "keys", 1000, "distinct customer keys")
	flag.IntVar(&c.size, "size", 0, "pad each value to at least this many bytes")
	flag.DurationVar(&c.wait, "wait", time.Minute, "how long to wait for the brokers (and the schema registry) to answer; with -read, for the records too")
	flag.StringVar(&c.format, "format", "json", "json (the sample orders as JSON) or avro (examples/avro's orders in the Schema Registry wire format)")
	flag.StringVar(&c.registry, "schema-registry", "http://127.0.0.1:8081", "the Schema Registry's URL, for -format avro")
	flag.IntVar(&c.read, "read", 0, "read the first N committed records of -topic and print their values as JSON lines, instead of writing")
	flag.Parse()
	if c.keys < 1 || c.rate < 0 || c.records < 0 || c.size < 0 || c.read < 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -keys must be at least 1; -rate, -records, -size and -read must not be negative")
		os.Exit(2)
	}
	if c.format != "json" && c.format != "avro" {
		fmt.Fprintf(os.Stderr, "loadgen: -format must be json or avro, not %q\n", c.format)
		os.Exit(2)
	}
	if c.format == "avro" && c.size > 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -size pads JSON orders only; it cannot be used with -format avro")
		os.Exit(2)
	}
	return c
}

// writer produces the sample orders and counts the records that failed.
type writer struct {
	cl       *kgo.Client
	log      *slog.Logger
	gen      func(n int64) *kgo.Record // the n-th record
	failed   atomic.Int64
	firstErr atomic.Pointer[error]
}

// promise counts a failed record and keeps the first error.
func (w *writer) promise(_ *kgo.Record, err error) {
	if err != nil {
		w.failed.Add(1)
		w.firstErr.CompareAndSwap(nil, &err)
	}
}

// write produces c.records orders (without end: until ctx ends) at
// c.rate, logging progress every 5 s, and returns how many it produced.
func (w *writer) write(ctx context.Context, c config, start time.Time) int64 {
	var interval time.Duration
	if c.rate > 0 {
		interval = time.Second / time.Duration(c.rate)
	}
	next := start
	lastLog := start
	var n int64
	for ; c.records == 0 || n < c.records; n++ {
		if ctx.Err() != nil {
			break
		}
		if interval > 0 {
			next = next.Add(interval)
			if d := time.Until(next); d > time.Millisecond {
				time.Sleep(d)
			}
		}
		w.cl.Produce(context.Background(), w.gen(n), w.promise)
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			w.log.Info("loadgen progress", "written", n+1, "per_sec", int(float64(n+1)/time.Since(start).Seconds()))
		}
	}
	return n
}

// finish flushes what is buffered (for 30 s, or 3 s when interrupted: the
// brokers may be going away too). It logs why and returns false when the
// flush failed or a record was not written.
func (w *writer) finish(ctx context.Context) bool {
	flushFor := 30 * time.Second
	if ctx.Err() != nil {
		flushFor = 3 * time.Second // interrupted: the brokers may be going away too
	}
	fctx, cancel := context.WithTimeout(context.Background(), flushFor)
	defer cancel()
	if err := w.cl.Flush(fctx); err != nil {
		w.log.Error("flushing", "err", err.Error())
		return false
	}
	if f := w.failed.Load(); f > 0 {
		w.log.Error("some records were not written", "failed", f, "first_err", (*w.firstErr.Load()).Error())
		return false
	}
	return true
}

// waitForBrokers pings until a broker answers or the wait is over.
func waitForBrokers(ctx context.Context, cl *kgo.Client, wait time.Duration) error {
	return retryFor(ctx, wait, "the brokers", func() (retry bool, err error) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := cl.Ping(pctx); err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return true, err
		}
		return false, nil
	})
}

// retryEvery is the pause between the attempts of retryFor.
const retryEvery = 500 * time.Millisecond

// retryFor is loadgen's one wait for what it needs before it writes
// (the brokers, the schema registry): it calls try every retryEvery until
// try succeeds, fails with retry false, ctx ends or wait is over, and
// then returns try's last error; past wait, in one line naming what it
// waited for.
func retryFor(ctx context.Context, wait time.Duration, what string, try func() (retry bool, err error)) error {
	deadline := time.Now().Add(wait)
	for {
		retry, err := try()
		if err == nil || !retry || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up waiting for %s: %w", what, err)
		}
		if serr := backoff.Sleep(ctx, retryEvery); serr != nil {
			return err
		}
	}
}
