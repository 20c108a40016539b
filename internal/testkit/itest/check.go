package itest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// CheckExactlyOnce asserts that out holds every input exactly once with
// per-key order kept.
func CheckExactlyOnce(t testing.TB, in Input, out []*kgo.Record) {
	t.Helper()
	seen := make(map[string]int, in.N)
	lastSeq := map[string]int{}
	dups, order := 0, 0
	for _, r := range out {
		v := string(r.Value)
		seen[v]++
		if seen[v] > 1 {
			dups++
			continue
		}
		k, s, _ := strings.Cut(v, ":")
		if string(r.Key) != k {
			t.Errorf("record %q has key %q", v, r.Key)
		}
		seq, _ := strconv.Atoi(s)
		if last, ok := lastSeq[k]; ok && seq != last+1 {
			order++
		}
		lastSeq[k] = seq
	}
	lost := 0
	for i := 0; i < in.N; i++ {
		if seen[string(in.Record(i).Value)] == 0 {
			lost++
		}
	}
	if dups > 0 || lost > 0 || order > 0 || len(out) != in.N {
		t.Errorf("exactly-once violated: %d outputs for %d inputs, %d duplicates, %d lost, %d per-key order breaks", len(out), in.N, dups, lost, order)
	}
}

// SumConsumed is the number of records the instances consumed together.
func SumConsumed(ins ...*Instance) uint64 {
	var n uint64
	for _, in := range ins {
		n += in.Pipeline.Stats().Consumed
	}
	return n
}

// FmtStats describes each instance's consumed records, commits and
// aborts, for a failure message.
func FmtStats(ins ...*Instance) string {
	var b strings.Builder
	for i, in := range ins {
		s := in.Pipeline.Stats()
		fmt.Fprintf(&b, "[%d: consumed %d commits %d aborts %d] ", i, s.Consumed, s.Commits, s.Aborts)
	}
	return b.String()
}

// Audit runs eoscheck's reader and checker over a finished run and fails
// the test on any anomaly, printing its table.
func (tg *Target) Audit(t testing.TB, group string, inputs, outputs []string) {
	t.Helper()
	tg.AuditWith(t, check.Source{Inputs: inputs, Outputs: outputs, Group: group}, check.Options{OneToOne: true, ExpectAll: true})
}

// AuditWith reads a finished run from src (on tg's brokers) with
// eoscheck's reader, checks it with opts, fails the test on any anomaly,
// printing its table and examples, and returns the report.
func (tg *Target) AuditWith(t testing.TB, src check.Source, opts check.Options) check.Report {
	t.Helper()
	rep := tg.Report(t, src, opts)
	if !rep.Clean() {
		t.Errorf("eoscheck found anomalies:\n%s%v", rep.Table(), rep.Examples)
	}
	return rep
}

// Report reads a finished run from src (on tg's brokers) with eoscheck's
// reader and returns its report under opts, anomalies and all: for a test
// that expects some (dead letters it caused).
func (tg *Target) Report(t testing.TB, src check.Source, opts check.Options) check.Report {
	t.Helper()
	src.Brokers = tg.Brokers
	r, err := check.NewReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run, err := r.Read(ctx)
	if err != nil {
		t.Fatalf("eoscheck read: %v", err)
	}
	return check.Check(run, opts)
}
