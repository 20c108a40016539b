package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// timedTransform passes records through and bounds each call by its own
// deadline, as the wasm transform does with PROCESSOR_WASM_TIMEOUT.
type timedTransform time.Duration

func (timedTransform) Process(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return append(out, r), nil
}

func (d timedTransform) CallTimeout() time.Duration { return time.Duration(d) }

var _ transform.Timed = timedTransform(0)

// budgetTestChain builds a chain of the given entries; an entry whose name
// starts with "timed" bounds its calls by timeouts[name].
func budgetTestChain(t *testing.T, timeouts map[string]time.Duration, entries ...transform.Entry) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	names := map[string]bool{}
	for _, e := range entries {
		if names[e.Name] {
			continue
		}
		names[e.Name] = true
		d := timeouts[e.Name]
		reg.Register(e.Name, transform.Plain("", func() (transform.Transform, error) {
			if strings.HasPrefix(e.Name, "timed") {
				return timedTransform(d), nil
			}
			return transform.Func(func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
				return append(out, r), nil
			}), nil
		}))
	}
	c, err := reg.Build(entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// backoffSum is the backoff between retries that CheckBudget adds: 10ms
// doubling up to 1s, once per retry.
func backoffSum(retries int) time.Duration {
	var sum time.Duration
	b := 10 * time.Millisecond
	for range retries {
		sum += b
		b = min(2*b, time.Second)
	}
	return sum
}

// New refuses a configuration in which one record's worst case, every
// attempt running to its deadline (PROCESSOR_TRANSFORM_TIMEOUT or the
// chain's own, whichever is longer) plus the backoff between retries, does
// not fit the transaction's time budget, with a *BudgetError that says
// which bound to change; it accepts one that fits.
func TestBudgetCheckAtStart(t *testing.T) {
	if got, want := backoffSum(3), 70*time.Millisecond; got != want {
		t.Fatalf("backoffSum(3) = %s, want %s", got, want)
	}
	if got, want := backoffSum(10), 4270*time.Millisecond; got != want { // 10..640ms, then capped at 1s
		t.Fatalf("backoffSum(10) = %s, want %s", got, want)
	}
	timed := transform.Entry{Name: "timed"}
	timedB := transform.Entry{Name: "timedb"}
	plain := transform.Entry{Name: "plain"}
	timeouts := map[string]time.Duration{"timed": time.Second, "timedb": 2 * time.Second}
	cases := []struct {
		name             string
		entries          []transform.Entry
		retries          int
		transformTimeout time.Duration
		budget           time.Duration
		stall            time.Duration // sets the default budget when budget is 0

		wantErr   bool
		wantPer   time.Duration
		wantEntry transform.Entry
	}{
		// One stage with its own 1s deadline, 3 retries: 4s + 70ms.
		{name: "chain timeout over budget", entries: []transform.Entry{plain, timed}, retries: 3, budget: 4 * time.Second,
			wantErr: true, wantPer: time.Second, wantEntry: timed},
		{name: "chain timeout exactly the budget", entries: []transform.Entry{timed}, retries: 3, budget: 4*time.Second + 70*time.Millisecond,
			wantErr: true, wantPer: time.Second, wantEntry: timed},
		{name: "chain timeout fits", entries: []transform.Entry{timed}, retries: 3, budget: 4*time.Second + 71*time.Millisecond},
		// Two stages with their own deadlines: one attempt may take both
		// (3s); the error names the one with the longest.
		{name: "chain timeouts add up", entries: []transform.Entry{timed, timedB}, retries: 1, budget: 6 * time.Second,
			wantErr: true, wantPer: 3 * time.Second, wantEntry: timedB},
		{name: "chain timeouts add up and fit", entries: []transform.Entry{timed, timedB}, retries: 1, budget: 6*time.Second + 11*time.Millisecond},
		// PROCESSOR_TRANSFORM_TIMEOUT longer than (or as long as) the
		// chain's own: it is the bound, and no entry is named.
		{name: "transform timeout over budget", entries: []transform.Entry{timed}, retries: 3, transformTimeout: 3 * time.Second, budget: 8 * time.Second,
			wantErr: true, wantPer: 3 * time.Second},
		{name: "transform timeout equal to the chain's", entries: []transform.Entry{timed}, retries: 3, transformTimeout: time.Second, budget: 4 * time.Second,
			wantErr: true, wantPer: time.Second},
		{name: "transform timeout fits", entries: []transform.Entry{timed}, retries: 3, transformTimeout: 1900 * time.Millisecond, budget: 8 * time.Second},
		// The binary's case: PROCESSOR_TRANSACTION_TIMEOUT=10s (budget 8s,
		// four fifths of TransactionTimeout), PROCESSOR_TRANSFORM_TIMEOUT=3s,
		// PROCESSOR_MAX_RETRIES=3.
		{name: "default budget from the stall timeout", entries: []transform.Entry{plain}, retries: 3, transformTimeout: 3 * time.Second, stall: 10 * time.Second,
			wantErr: true, wantPer: 3 * time.Second},
		// No deadline at all: only the backoff counts. 100 retries back
		// off for 1.27s + 93s.
		{name: "many retries without timeouts", entries: []transform.Entry{plain}, retries: 100, stall: 40 * time.Second,
			wantErr: true},
		{name: "retries without timeouts fit", entries: []transform.Entry{plain}, retries: 10, budget: 4271 * time.Millisecond},
		{name: "retries without timeouts exactly the budget", entries: []transform.Entry{plain}, retries: 10, budget: 4270 * time.Millisecond,
			wantErr: true},
		{name: "no retries, no timeouts", entries: []transform.Entry{plain}, retries: 0, budget: time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chain := budgetTestChain(t, timeouts, c.entries...)
			defer chain.Close()
			_, err := New(chain, Options{
				OutputTopic:        "out",
				CommitInterval:     100 * time.Millisecond,
				MaxRecordsPerTxn:   100,
				TransactionTimeout: c.stall,
				TxnBudget:          c.budget,
				MaxRetries:         c.retries,
				TransformTimeout:   c.transformTimeout,
				Metrics:            NewMetrics(prometheus.NewRegistry()),
			})
			var be *BudgetError
			if !c.wantErr {
				if err != nil {
					t.Fatalf("New: %v, want no error", err)
				}
				return
			}
			if !errors.As(err, &be) {
				t.Fatalf("New: %v (%T), want a *BudgetError", err, err)
			}
			budget := c.budget
			if budget == 0 {
				budget = c.stall * 4 / 5
			}
			worst := time.Duration(c.retries+1)*c.wantPer + backoffSum(c.retries)
			if be.Budget != budget || be.Attempts != c.retries+1 || be.PerAttempt != c.wantPer || be.Worst != worst || be.Entry != c.wantEntry {
				t.Errorf("BudgetError = %+v, want Budget %s Attempts %d PerAttempt %s Worst %s Entry %+v",
					*be, budget, c.retries+1, c.wantPer, worst, c.wantEntry)
			}
			msg := be.Error()
			wants := []string{worst.String(), budget.String(), c.wantPer.String()}
			if c.wantPer == 0 {
				wants[2] = "backoff"
			}
			for _, want := range wants {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not mention %s", msg, want)
				}
			}
		})
	}
}
