package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With -crash a run kills the system after its latency phase, starts it
// again (a static group member, so the restart gets the killed member's
// partitions back without waiting out its session) and measures how long
// until a new record is on the output; the exactly-once copier, on kfake
// over TCP, resumes from its committed offsets, so the output count check
// still holds across the kill, and the latency samples are the latency
// phase's alone.
func TestRecoverPhase(t *testing.T) {
	dir := t.TempDir()
	copier := filepath.Join(dir, "copier")
	if out, err := exec.Command("go", "build", "-o", copier, "../copier").CombinedOutput(); err != nil {
		t.Fatalf("building bench/copier: %v\n%s", err, out)
	}
	ctx := context.Background()
	b := fakeBroker(t)
	o := options{rounds: 1, partitions: 2, liveRate: 200, liveFor: 500 * time.Millisecond, runTimeout: time.Minute, crash: true}
	e := &environment{copier: copier, logs: dir}
	in := &input{topic: "bench-1-in", size: 100, records: 2000}
	if err := preloadOne(ctx, o.partitions, b, in, new([]string)); err != nil {
		t.Fatal(err)
	}
	sys, _ := systemByKey("copier")
	s := &runSpec{sys: sys, name: "bench-1-copier", group: "bench-1-copier", round: 1, interval: 100 * time.Millisecond,
		in: in, out: "bench-1-copier-out", live: "bench-1-copier-live", log: filepath.Join(dir, "copier.log"), member: "bench-1-copier-1"}
	r := runOne(ctx, o, e, b, s)
	if r.err != "" {
		t.Fatalf("the run failed: %s", r.err)
	}
	if r.ready <= 0 || r.ready > o.runTimeout {
		t.Errorf("ready after the crash: %s", r.ready)
	}
	if r.restored != -1 {
		t.Errorf("the copier has no store, yet %d records were restored", r.restored)
	}
	live := int(float64(o.liveRate) * o.liveFor.Seconds())
	if len(r.lat) != live {
		t.Errorf("%d latency samples, %d live records", len(r.lat), live)
	}
	if r.expected <= int64(in.records+1+live) {
		t.Errorf("expected %d outputs: the probes are not counted", r.expected)
	}
	if r.outputs != r.expected {
		t.Errorf("the reader saw %d outputs, %d went in (warnings: %v)", r.outputs, r.expected, r.warnings)
	}
	if len(r.warnings) > 0 {
		t.Errorf("warnings: %s", strings.Join(r.warnings, "; "))
	}
}

// With -crash the results file has a table of the time to ready after a
// crash and the records restored, each row beside its Kafka Streams pair;
// without a run that measured it, none.
func TestCrashTable(t *testing.T) {
	agg, _ := systemByKey("aggregate")
	ks, _ := systemByKey("kstreams-sum")
	in := &input{topic: "in", size: 100, records: 1000, bytes: 100_000}
	run := func(s system, ready time.Duration) *result {
		return &result{spec: &runSpec{sys: s, round: 1, interval: 100 * time.Millisecond, in: in}, wall: time.Second, ready: ready, restored: 1000}
	}
	rp := &report{o: options{sizes: []int{100}, intervals: []time.Duration{100 * time.Millisecond}, systems: []string{"aggregate", "kstreams-sum"}, crash: true},
		env: &environment{avail: map[string]string{}}, inputs: map[int]*input{100: in},
		results: []*result{run(agg, 2*time.Second), run(ks, 8*time.Second)}}
	var b strings.Builder
	rp.writeCrashTable(&b)
	for _, want := range []string{"| 100 B | 100ms | " + agg.label + " | 2.00 | 1,000 | 0.25× |", "| 100 B | 100ms | " + ks.label + " | 8.00 | 1,000 | 1.00× |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the crash table lacks %q:\n%s", want, b.String())
		}
	}
	rp.o.crash = false
	for _, r := range rp.results {
		r.ready = 0
	}
	b.Reset()
	rp.writeCrashTable(&b)
	if b.Len() != 0 {
		t.Errorf("a crash table without -crash:\n%s", b.String())
	}
}
