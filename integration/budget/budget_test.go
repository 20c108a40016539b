package budget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// The tests of the transaction's time budget, the broker's transaction
// timeout and PROCESSOR_MAX_TXN_BYTES.

// budgetHeaderTxn is a header the tests' transforms stamp on every output:
// the deadline of the context the record was processed under. With no
// PROCESSOR_TRANSFORM_TIMEOUT that is the open transaction's budget end,
// which differs from one transaction to the next, so the committed output
// grouped by it gives the input records of every committed transaction.
const budgetHeaderTxn = "test.txn"

func budgetTxnTag(ctx context.Context) []byte {
	if d, ok := ctx.Deadline(); ok {
		return strconv.AppendInt(nil, d.UnixNano(), 10)
	}
	return []byte("no-deadline")
}

// budgetPerTxn returns the number of outputs per committed transaction, in
// the order the transactions began, and the largest.
func budgetPerTxn(outs []*kgo.Record) (sizes []int, largest int) {
	m := map[string]int{}
	for _, r := range outs {
		m[itest.HeaderValue(r, budgetHeaderTxn)]++
	}
	tags := make([]string, 0, len(m))
	for tag := range m {
		tags = append(tags, tag)
	}
	sort.Slice(tags, func(i, j int) bool { // equal lengths: nanoseconds since 1970
		return len(tags[i]) < len(tags[j]) || len(tags[i]) == len(tags[j]) && tags[i] < tags[j]
	})
	for _, tag := range tags {
		sizes = append(sizes, m[tag])
		largest = max(largest, m[tag])
	}
	return sizes, largest
}

// budgetHistogram reads h (e.g. processor_transaction_records): its count, sum,
// and cumulative count per upper bound.
func budgetHistogram(t testing.TB, h prometheus.Histogram) (count uint64, sum float64, le map[float64]uint64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathering the histogram: %v (%d families)", err, len(mfs))
	}
	hh := mfs[0].GetMetric()[0].GetHistogram()
	le = map[float64]uint64{}
	for _, b := range hh.GetBucket() {
		le[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	return hh.GetSampleCount(), hh.GetSampleSum(), le
}

// budgetAborts formats the non-zero abort counts by reason.
func budgetAborts(tm *txn.Metrics) string {
	var parts []string
	for _, r := range []txn.Reason{txn.ReasonRebalance, txn.ReasonOffsetCommit, txn.ReasonProduce, txn.ReasonTransform, txn.ReasonFenced,
		txn.ReasonEndError, txn.ReasonInjected, txn.ReasonWatchdog, txn.ReasonTimeout} {
		if n := testutil.ToFloat64(tm.Aborted.WithLabelValues(string(r))); n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%v", r, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// budgetBusy keeps n goroutines spinning until the returned stop is called.
func budgetBusy(n int) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for !done.Load() {
				for i := range 10_000 {
					x += i
				}
				// Yield now and then, as busy request handlers do at every
				// channel or syscall: a goroutine that never does delays
				// every other one by the 10ms preemption slice, which
				// under -cpu 1 measures the scheduler, not the processor.
				runtime.Gosched()
			}
			_ = x
		}()
	}
	return func() { done.Store(true); wg.Wait() }
}

// A configuration in which one record's retries cannot fit the
// transaction's time budget is refused at start: exit 2, one line naming the
// setting to change (the per-record timeout when there is one, else the
// retries). The broker is a listener that accepts and never answers, so
// that the Kafka client, which the processor creates before the check,
// cannot add log lines of its own (with a refused connection it does, about
// half the time).
func TestBudgetBinaryExits2(t *testing.T) {
	t.Parallel()
	bin := itest.Binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns = append(conns, c)
		}
	}()
	base := launch.Instance{Brokers: []string{ln.Addr().String()}, Group: "g", InputTopics: []string{"in"}, OutputTopic: "out",
		HTTPAddr: "127.0.0.1:0"}
	cases := []struct {
		env  []string
		want []string
	}{
		// Budget 8s (four fifths of 10s); 4 attempts of 3s plus 70ms of backoff.
		{[]string{"PROCESSOR_TRANSACTION_TIMEOUT=10s", "PROCESSOR_SESSION_TIMEOUT=12s", "PROCESSOR_TRANSFORM_TIMEOUT=3s", "PROCESSOR_MAX_RETRIES=3"},
			[]string{`PROCESSOR_TRANSFORM_TIMEOUT="3s"`, "12.07s", "8s"}},
		// Budget 32s (default 40s); no timeouts, but 100 retries back off for 94.27s.
		{[]string{"PROCESSOR_MAX_RETRIES=100"}, []string{`PROCESSOR_MAX_RETRIES="100"`, "1m34.27s", "32s"}},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		inst := base
		inst.Extra = c.env
		cmd := inst.Command(bin, launch.PathOnly)
		var stderr bytes.Buffer
		cmd.Output = &stderr
		p, err := launch.Start(ctx, cmd)
		if err == nil {
			err = p.Wait()
		}
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Errorf("%v: still running after 20s (a budget that cannot fit must be refused at start): %s", c.env, stderr.String())
			continue
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: exit %v, want code 2; stderr %q", c.env, err, stderr.String())
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Count(msg, "\n") != 0 || strings.Contains(msg, "goroutine") {
			t.Errorf("%v: stderr %q, want one line", c.env, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: stderr %q lacks %q", c.env, msg, w)
			}
		}
	}
	t.Logf("connections to the broker before the configuration was refused: %d", accepted.Load())
}

// The watchdog shortens the transaction, not only the next poll: with a
// transform too slow for the budget (2ms a record, 150ms budget, a commit
// interval of 1s and up to 1000 records), every committed transaction holds
// at most the records that fit the budget (76); a produce failed by an
// aborted transaction does not abort the next one (no produce_error); the
// output is exactly once. Also under CPU load: a goroutine spinning
// alongside.
func TestWatchdogShortensTransactions(t *testing.T) {
	for _, load := range []bool{false, true} {
		name := "idle"
		if load {
			name = "cpu-load"
		}
		t.Run(name, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				const budget, perRecord = 150 * time.Millisecond, 2 * time.Millisecond
				in := itest.Input{Topic: itest.Unique("wdtxn-in"), N: 400, Keys: 20}
				out, group := itest.Unique("wdtxn-out"), itest.Unique("wdtxn-group")
				tg.NewTopics(t, 2, in.Topic, out)
				tg.Produce(t, in, 0, in.N)
				if load {
					defer budgetBusy(1)()
				}
				chain := itest.FuncChain(t, "slow", func(ctx context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
					time.Sleep(perRecord)
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: budgetHeaderTxn, Value: budgetTxnTag(ctx)})
					return append(out, r), nil
				})
				began := time.Now()
				a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out, Chain: chain,
					MaxRecords: 1000, CommitInterval: time.Second, TxnBudget: budget})
				tg.WaitCaughtUpWithin(t, 30*time.Second, group, in.Topic, a)
				a.Stop(t)
				t.Logf("%s: caught up in %s; aborts: %s", tg.Name, time.Since(began).Round(time.Millisecond), budgetAborts(a.TxnMetrics))

				if got := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonWatchdog))); got < 1 {
					t.Errorf("aborted{reason=watchdog} = %v, want at least 1", got)
				}
				if got := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonProduce))); got != 0 {
					t.Errorf("aborted{reason=produce_error} = %v, want 0: a produce failed by an aborted transaction reached the next one", got)
				}
				outs := tg.ReadAll(t, out, true)
				itest.CheckExactlyOnce(t, in, outs)

				// A record starts only while the budget lasts, and each takes
				// at least 2ms: at most 150/2+1 records per transaction.
				maxPer := int(budget/perRecord) + 1
				sizes, largest := budgetPerTxn(outs)
				t.Logf("input records per committed transaction, in order: %v", sizes)
				if largest > maxPer {
					t.Errorf("a committed transaction holds %v input records, want at most %d (what fits the %s budget)", sizes, maxPer, budget)
				}
				count, sum, le := budgetHistogram(t, a.TxnMetrics.Records)
				commits := testutil.ToFloat64(a.TxnMetrics.Committed)
				if float64(count) != commits || int(sum) != in.N {
					t.Errorf("transaction_records: %d transactions with %v records, want %v with %d", count, sum, commits, in.N)
				}
				if le[256] != count {
					t.Errorf("transaction_records: %d of %d committed transactions hold more than 256 records", count-le[256], count)
				}
				if count > 0 && sum/float64(count) > float64(maxPer) {
					t.Errorf("transaction_records: %v records per transaction on average, want at most %d", sum/float64(count), maxPer)
				}
			})
		})
	}
}

// A record that takes longer than the budget even alone in its
// transaction (its transform waits 300ms, or until its context ends, on
// partition 0 offset 5; budget 150ms) is no endless abort loop, nor a
// search by halving: it runs into its own limit (half the budget), is
// dead-lettered with an error saying why, with at most one abort; every
// other record is in the output exactly once, in order per key.
func TestBudgetRecordAloneDeadLettered(t *testing.T) {
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("alone-in"), N: 300, Keys: 10}
		out, dlq, group := itest.Unique("alone-out"), itest.Unique("alone-dlq"), itest.Unique("alone-group")
		tg.NewTopics(t, 2, in.Topic, out, dlq)
		tg.Produce(t, in, 0, in.N)
		var slowCalls atomic.Int32
		chain := itest.FuncChain(t, "slow", func(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			if src.Partition == 0 && src.Offset == 5 {
				slowCalls.Add(1)
				tm := time.NewTimer(300 * time.Millisecond)
				defer tm.Stop()
				select {
				case <-ctx.Done():
					return out, ctx.Err()
				case <-tm.C:
				}
			}
			return append(out, r), nil
		})
		began := time.Now()
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out, Chain: chain,
			OnError: pipeline.DeadLetter, DLQTopic: dlq, MaxRecords: 1000, CommitInterval: 500 * time.Millisecond, TxnBudget: 150 * time.Millisecond})
		tg.WaitCaughtUpWithin(t, 30*time.Second, group, in.Topic, a)
		a.Stop(t)
		watchdog := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonWatchdog)))
		t.Logf("%s: caught up in %s; the slow record was tried %d times; aborts: %s", tg.Name, time.Since(began).Round(time.Millisecond),
			slowCalls.Load(), budgetAborts(a.TxnMetrics))
		if watchdog > 1 {
			t.Errorf("aborted{reason=watchdog} = %v, want at most 1", watchdog)
		}
		if n := slowCalls.Load(); n != 1 {
			t.Errorf("the slow record was run %d times, want once", n)
		}

		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != 1 {
			t.Fatalf("%d dead letters, want 1", len(dead))
		}
		d := dead[0]
		if src, ok := check.Lineage(d); !ok || src != (check.Input{Topic: in.Topic, Partition: 0, Offset: 5}) {
			t.Errorf("the dead letter is of %+v (lineage headers found: %v), want %s partition 0 offset 5", src, ok, in.Topic)
		}
		if msg := itest.HeaderValue(d, record.HeaderError); !strings.Contains(msg, "did not finish within") || !strings.Contains(msg, "PROCESSOR_TRANSFORM_TIMEOUT") {
			t.Errorf("the dead letter's %s is %q, want it to say the record did not finish within its limit, naming the setting", record.HeaderError, msg)
		}
		if got := itest.HeaderValue(d, record.HeaderErrorTransform); got != "slow" {
			t.Errorf("the dead letter's %s is %q, want slow", record.HeaderErrorTransform, got)
		}
		if got := testutil.ToFloat64(a.PipelineMetrics.DLQ); got != 1 {
			t.Errorf("records_dlq_total = %v, want 1", got)
		}

		// Every other input exactly once, in order per key.
		deadValue := string(d.Value)
		outs := tg.ReadAll(t, out, true)
		seen := map[string]int{}
		last := map[string]int{}
		for _, r := range outs {
			v := string(r.Value)
			seen[v]++
			k, s, _ := strings.Cut(v, ":")
			seq, _ := strconv.Atoi(s)
			if l, ok := last[k]; ok && seq <= l {
				t.Errorf("key %s: %s after seq %d", k, v, l)
			}
			last[k] = seq
		}
		if seen[deadValue] != 0 {
			t.Errorf("the dead-lettered record %q is in the output too", deadValue)
		}
		for i := range in.N {
			v := string(in.Record(i).Value)
			if v != deadValue && seen[v] != 1 {
				t.Errorf("input %q is in the output %d times", v, seen[v])
			}
		}
		if len(outs) != in.N-1 {
			t.Errorf("%d outputs, want %d", len(outs), in.N-1)
		}
	})
}

// A retry that could not end within the budget is not started, and the
// record is not failed for it: the transaction is aborted and retried
// smaller, and the record, whose transform fails retriably three times
// (the first time only just before the budget ends, which the records
// before it used up, each well within its own limit) and then passes,
// reaches the output. Nothing is dead-lettered; exactly once.
func TestBudgetRetriesNotPastBudget(t *testing.T) {
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		// The retries' backoffs (10 and 20ms) must stay well inside the
		// record's limit, half the budget, on a loaded machine under the
		// race detector: at 150ms a stall of 45ms failed the record.
		const budget = 300 * time.Millisecond
		in := itest.Input{Topic: itest.Unique("retry-in"), N: 60, Keys: 6}
		out, dlq, group := itest.Unique("retry-out"), itest.Unique("retry-dlq"), itest.Unique("retry-group")
		tg.NewTopics(t, 1, in.Topic, out, dlq)
		tg.Produce(t, in, 0, in.N)
		var attempts atomic.Int32
		var slowed [5]atomic.Bool
		chain := itest.FuncChain(t, "flaky", func(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			if src.Offset < 5 && !slowed[src.Offset].Swap(true) {
				time.Sleep(budget / 7) // the first time: together they use most of the budget
			}
			if src.Offset != 5 {
				return append(out, r), nil
			}
			switch n := attempts.Add(1); {
			case n == 1:
				// Use the budget up but for 5ms: the 10ms backoff before
				// the retry would cross it.
				// Never as long as the record's own limit (half the
				// budget): a slow machine may have started it late.
				wait := budget - 5*time.Millisecond
				if d, ok := ctx.Deadline(); ok {
					wait = time.Until(d) - 5*time.Millisecond
				}
				time.Sleep(min(wait, budget/2-15*time.Millisecond))
				return out, transform.Retriable(errors.New("lookup timed out"))
			case n <= 3:
				return out, transform.Retriable(errors.New("lookup timed out"))
			}
			return append(out, r), nil
		})
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out, Chain: chain,
			OnError: pipeline.DeadLetter, DLQTopic: dlq, MaxRecords: 1000, CommitInterval: time.Second, TxnBudget: budget})
		tg.WaitCaughtUpWithin(t, 30*time.Second, group, in.Topic, a)
		a.Stop(t)
		t.Logf("%s: the flaky record was tried %d times; retries %v; aborts: %s", tg.Name, attempts.Load(),
			testutil.ToFloat64(a.PipelineMetrics.Retries), budgetAborts(a.TxnMetrics))
		if dead := tg.ReadAll(t, dlq, true); len(dead) != 0 {
			t.Errorf("%d dead letters, want none; the first says %q", len(dead), itest.HeaderValue(dead[0], record.HeaderError))
		}
		if got := testutil.ToFloat64(a.PipelineMetrics.DLQ); got != 0 {
			t.Errorf("records_dlq_total = %v, want 0", got)
		}
		if got := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonWatchdog))); got < 1 {
			t.Errorf("aborted{reason=watchdog} = %v, want at least 1 (the retry that would cross the budget)", got)
		}
		if got := attempts.Load(); got < 4 {
			t.Errorf("the flaky record was tried %d times, want at least 4 (three failures, then a pass)", got)
		}
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
	})
}

// budgetWaitBrokerAbort waits, up to max, until the broker has aborted the
// open transaction of txnID at its transaction timeout: the transaction was
// seen ongoing and is no longer, or its producer epoch moved on. It reports
// whether that was seen.
func budgetWaitBrokerAbort(ctx context.Context, adm *kadm.Client, txnID string, max time.Duration) bool {
	deadline := time.Now().Add(max)
	var epoch int16 = -1
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ds, err := adm.DescribeTransactions(rctx, txnID)
		cancel()
		if d, ok := ds[txnID]; err == nil && ok && d.Err == nil {
			switch {
			case d.State == "Ongoing" && epoch < 0:
				epoch = d.ProducerEpoch
			case epoch >= 0 && (d.State != "Ongoing" || d.ProducerEpoch != epoch):
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// A transaction the broker aborts at the transaction timeout bumps the
// producer epoch; that is not another instance fencing this one. The
// transform blocks on two records (in two transactions) until the broker has
// aborted the open transaction (the budget is longer than the transaction
// timeout, so the watchdog stays out of it). The instance must recover both
// times (aborts counted as reason "timeout"), not stop with a *txn.FencedError nor count a fencing; the
// output is exactly once.
func TestTxnTimeoutIsNotFencing(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		// The shortest transaction timeout the harness can have: its
		// session timeout (2s more) must be at least 6s
		// (group.min.session.timeout.ms, in kfake too).
		txnTimeout, waitAbort, bound := 4*time.Second, 10*time.Second, 30*time.Second
		if tg.Fake == nil {
			// Kafka looks for timed-out transactions every 10s
			// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
			waitAbort, bound = 16*time.Second, 50*time.Second
		}
		in := itest.Input{Topic: itest.Unique("tmo-in"), N: 100, Keys: 10}
		out, group := itest.Unique("tmo-out"), itest.Unique("tmo-group")
		txnID := group + "-a"
		tg.NewTopics(t, 1, in.Topic, out)
		tg.Produce(t, in, 0, in.N)
		adm := tg.Admin(t)
		// Offset 5 blocks on its first attempt. The transaction stays open
		// after that (its producer has failed, but the records of the poll
		// go on), so offset 50 blocks only once offset 5 came round again:
		// in a transaction of the rebuilt session.
		var mu sync.Mutex
		visits := map[int64]int{}
		var waits []string
		chain := itest.FuncChain(t, "block", func(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			mu.Lock()
			visits[src.Offset]++
			block := (src.Offset == 5 && visits[5] == 1) || (src.Offset == 50 && visits[5] >= 2 && len(waits) == 1)
			if block {
				waits = append(waits, "")
			}
			mu.Unlock()
			if block {
				start := time.Now()
				aborted := budgetWaitBrokerAbort(ctx, adm, txnID, waitAbort)
				mu.Lock()
				waits[len(waits)-1] = fmt.Sprintf("offset %d: %s (broker abort seen: %v)", src.Offset, time.Since(start).Round(10*time.Millisecond), aborted)
				mu.Unlock()
			}
			return append(out, r), nil
		})
		began := time.Now()
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: txnID, Topics: []string{in.Topic}, Out: out, Chain: chain,
			TxnTimeout: txnTimeout, TxnBudget: 2 * waitAbort})
		tg.WaitCaughtUpWithin(t, bound, group, in.Topic, a)
		a.Stop(t)
		mu.Lock()
		t.Logf("%s: caught up in %s; blocked: %s; aborts: %s; fenced %v", tg.Name, time.Since(began).Round(10*time.Millisecond),
			strings.Join(waits, ", "), budgetAborts(a.TxnMetrics), testutil.ToFloat64(a.TxnMetrics.Fenced))
		if len(waits) != 2 {
			t.Errorf("the transform blocked %d times, want 2", len(waits))
		}
		mu.Unlock()
		var fe *txn.FencedError
		if errors.As(a.Err, &fe) {
			t.Errorf("the instance stopped as fenced: %v", a.Err)
		}
		timeouts := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonTimeout)))
		produce := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonProduce)))
		if fenced := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonFenced))); fenced != 0 {
			t.Errorf("aborted{reason=fenced} = %v, want 0: the broker's transaction timeout counted as fencing", fenced)
		}
		// One abort per block, counted as the broker's timeout: on kfake
		// the end fails with a fencing error and the session is rebuilt;
		// Kafka 4 (KIP-890 transactions) accepts the client's abort, and the
		// produces after the timeout fail with INVALID_PRODUCER_EPOCH.
		if timeouts < 2 || produce != 0 {
			t.Errorf("aborted{reason=timeout} = %v, aborted{reason=produce_error} = %v; want at least 2 and 0, one timeout per blocked record (aborts: %s)",
				timeouts, produce, budgetAborts(a.TxnMetrics))
		}
		if got := testutil.ToFloat64(a.TxnMetrics.Fenced); got != 0 {
			t.Errorf("producer_fenced_total = %v, want 0: the broker's transaction timeout counted as fencing", got)
		}
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
	})
}

// PROCESSOR_MAX_TXN_BYTES bounds a transaction's output: with 1MiB, 8KiB
// records, up to 10000 records and a commit interval of 5s, no committed
// transaction holds more than 1MiB/8KiB records and a few; exactly once.
func TestMaxTxnBytes(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		const maxBytes, size = 1 << 20, 8 << 10
		in := itest.Input{Topic: itest.Unique("bytes-in"), N: 2000, Keys: 20}
		out, group := itest.Unique("bytes-out"), itest.Unique("bytes-group")
		tg.NewTopics(t, 3, in.Topic, out)
		pad := "|" + strings.Repeat("x", size)
		cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.ProducerLinger(2*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range in.N {
			r := in.Record(i)
			r.Value = append(r.Value, pad...)
			recs = append(recs, r)
		}
		pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = cl.ProduceSync(pctx, recs...).FirstErr()
		cancel()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		chain := itest.FuncChain(t, "tag", func(ctx context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: budgetHeaderTxn, Value: budgetTxnTag(ctx)})
			return append(out, r), nil
		})
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out, Chain: chain,
			MaxRecords: 10000, CommitInterval: 5 * time.Second, MaxTxnBytes: maxBytes})
		tg.WaitCaughtUpWithin(t, 30*time.Second, group, in.Topic, a)
		a.Stop(t)
		outs := tg.ReadAll(t, out, true)
		sizes, largest := budgetPerTxn(outs)
		t.Logf("%s: input records per committed transaction, in order: %v; aborts: %s", tg.Name, sizes, budgetAborts(a.TxnMetrics))
		if limit := maxBytes/size + 8; largest > limit {
			t.Errorf("committed transactions hold %v records of %d bytes, in order; want at most %d each (PROCESSOR_MAX_TXN_BYTES=1MiB)", sizes, size, limit)
		}
		if count, _, le := budgetHistogram(t, a.TxnMetrics.Records); le[256] != count {
			t.Errorf("transaction_records: %d of %d committed transactions hold more than 256 records", count-le[256], count)
		}
		for _, r := range outs {
			if len(r.Value) != len(pad)+bytes.IndexByte(r.Value, '|') {
				t.Fatalf("output value of %d bytes, not an input's", len(r.Value))
			}
			r.Value = r.Value[:bytes.IndexByte(r.Value, '|')]
		}
		itest.CheckExactlyOnce(t, in, outs)
	})
}

// A produce blocked on a full client buffer while the brokers are gone
// does not hold up a stop for longer than its bound. A private kfake
// cluster that takes every Produce request and never answers it: the
// outputs fill the client's buffer (50000 records in franz-go v1.22) and
// Produce blocks, while the group's other requests (the attempt markers'
// offset commits among them) are answered, so the records reach the
// transform whatever the polls hold. Then the cluster is closed and the
// instance stopped: Run must return within the budget, the transaction
// timeout and 15s (leaving the group and closing the client are bounded
// by 5s each) of the stop.
func TestShutdownBlockedProduce(t *testing.T) {
	// Serial: 50,000 records must pass the transform within half the budget.
	tg := itest.NewFake(t)
	const txnTimeout = 10 * time.Second
	budget := txnTimeout * 4 / 5
	in := itest.Input{Topic: itest.Unique("blocked-in"), N: 80_000, Keys: 100}
	out, group := itest.Unique("blocked-out"), itest.Unique("blocked-group")
	tg.NewTopics(t, 6, in.Topic, out)
	tg.Produce(t, in, 0, in.N)
	var held atomic.Int64
	tg.Fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		tg.Fake.KeepControl()
		held.Add(1)
		return nil, nil, true // taken, never answered
	})
	var after atomic.Int64
	chain := itest.FuncChain(t, "count", func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		after.Add(1)
		return append(out, r), nil
	})
	a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out, Chain: chain,
		TxnTimeout: txnTimeout, MaxRecords: 200_000, CommitInterval: 5 * time.Second})
	full := 50_001 // the output that cannot be buffered
	deadline := time.Now().Add(budget / 2)
	for after.Load() < int64(full) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	through := after.Load()
	t.Logf("records through the transform with no Produce answered: %d (Produce requests held: %d)", through, held.Load())
	if through < int64(full) {
		t.Fatalf("only %d records went through the transform in %s: the client's buffer (50000) did not fill, so no Produce blocked", through, budget/2)
	}
	if held.Load() == 0 {
		t.Fatal("no Produce request reached the cluster")
	}
	tg.Fake.Close()

	stopped := time.Now()
	a.Stopped = true
	a.Cancel()
	bound := budget + txnTimeout + 15*time.Second
	select {
	case <-a.Done:
		t.Logf("Run returned %s after the stop (bound %s): %v", time.Since(stopped).Round(10*time.Millisecond), bound, a.Err)
	case <-time.After(bound):
		t.Fatalf("Run did not return within %s of the stop (budget %s + transaction timeout %s + 15s): a Produce blocked on the full buffer holds up the shutdown",
			bound, budget, txnTimeout)
	}
}
