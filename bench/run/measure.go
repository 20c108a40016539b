package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/sample"
)

// result is what one run measured.
type result struct {
	spec        *runSpec
	err         string // the run failed: why
	unavailable string // the system turned out not to be available: why

	wall     time.Duration // start until the group's committed offsets reached the input's end
	first    time.Duration // start until the reader saw the first output record
	cpu      float64       // CPU seconds of the process (and children) over that time
	hwm      int64         // peak RSS (VmHWM), bytes, at the end of the drain
	lat      []time.Duration
	liveSent int
	outputs  int64 // output records a read_committed reader saw
	expected int64 // input records, the warm-up and the latency phase's
	warnings []string
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// runOne runs one system on one input with one commit interval:
//
//  1. creates its output topic and its "live" topic (a second input, empty
//     but for one warm-up record, written to only in step 5),
//  2. starts a read_committed reader on the output topic,
//  3. starts the system and polls the group's committed offsets (kadm)
//     until they reach the input's end offsets: the drain; its wall time,
//     the process's CPU time and peak RSS at that moment are the
//     throughput figures,
//  4. (the system now idles, caught up)
//  5. writes records at a steady rate to the live topic, each stamped with
//     the time it is produced, and the reader records now - timestamp for
//     each of them on the output: the end-to-end latency,
//  6. stops the system (SIGTERM) and checks that the reader saw as many
//     output records as went in.
func runOne(ctx context.Context, o options, e *environment, b *broker, s *runSpec) *result {
	r := &result{spec: s}
	t0 := time.Now()
	var phases []string
	phase := func(name string) { phases = append(phases, fmt.Sprintf("%s %.2fs", name, time.Since(t0).Seconds())) }
	label := fmt.Sprintf("round %d/%d, %d B, commit %s, %s", s.round, o.rounds, s.in.size, s.interval, s.sys.label)
	fail := func(format string, args ...any) *result {
		r.err = fmt.Sprintf(format, args...)
		say("%s: FAILED: %s (log: %s)", label, r.err, s.log)
		return r
	}
	if err := b.createTopics(ctx, o.partitions, s.out, s.live); err != nil {
		return fail("%v", err)
	}
	rd, err := startReader(b, s.out)
	if err != nil {
		return fail("starting the reader: %v", err)
	}
	defer rd.stop()
	pr, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.DefaultProduceTopic(s.live), kgo.ProducerLinger(0),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return fail("%v", err)
	}
	defer pr.Close()
	// The warm-up record: the producer's connection, producer ID and
	// metadata are in place before the latency phase.
	if err := pr.ProduceSync(ctx, sample.Order(-1, 1000, s.in.size)).FirstErr(); err != nil {
		return fail("writing the warm-up record to %s: %v", s.live, err)
	}
	phase("ready")
	r.expected = int64(s.in.records) + 1

	cmd, err := s.sys.cmd(e, b, s, o.processorEx)
	if err != nil {
		return fail("%v", err)
	}
	logf, err := os.Create(s.log)
	if err != nil {
		return fail("%v", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	rd.setStart(start)
	if err := cmd.Start(); err != nil {
		return fail("starting: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			r.warnings = append(r.warnings, "did not stop within 30 s of SIGTERM; killed")
		}
	}
	defer stop()

	// 3. The drain.
	deadline := start.Add(o.runTimeout)
	for {
		if why := unknownVar(s); why != "" {
			r.unavailable = why
			return r
		}
		if done, err := drained(ctx, b, s); err == nil && done {
			break
		}
		select {
		case <-exited:
			if why := unknownVar(s); why != "" {
				r.unavailable = why
				return r
			}
			if why := rejected(s, cmd); why != "" {
				r.unavailable = why
				return r
			}
			return fail("exited before the drain ended (%v): %s", waitErr, logTail(s.log))
		case <-ctx.Done():
			return fail("interrupted")
		default:
		}
		if time.Now().After(deadline) {
			return fail("not drained within %s", o.runTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.wall = time.Since(start)
	phase("drained")
	var err1, err2 error
	r.cpu, err1 = cpuSeconds(cmd.Process.Pid)
	r.hwm, err2 = peakRSS(cmd.Process.Pid)
	if err := errors.Join(err1, err2); err != nil {
		return fail("reading /proc: %v", err)
	}

	// 5. The latency phase.
	n := int(float64(o.liveRate) * o.liveFor.Seconds())
	liveStart := time.Now()
	rd.setLiveFrom(liveStart.Truncate(time.Millisecond))
	every := time.Second / time.Duration(o.liveRate)
	for i := range n {
		if d := time.Until(liveStart.Add(time.Duration(i) * every)); d > 0 {
			time.Sleep(d)
		}
		pr.Produce(ctx, sample.Order(int64(s.in.records+i), 1000, s.in.size), nil)
	}
	if err := pr.Flush(ctx); err != nil {
		return fail("latency phase: %v", err)
	}
	r.liveSent = n
	r.expected += int64(n)
	phase("written")
	wait := time.Now().Add(2*s.interval + 15*time.Second)
	for rd.live.Load() < int64(n) && time.Now().Before(wait) {
		select {
		case <-exited:
			return fail("exited during the latency phase (%v): %s", waitErr, logTail(s.log))
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}

	// 6. Stop, and count the outputs.
	phase("seen")
	stop()
	phase("stopped")
	wait = time.Now().Add(5 * time.Second)
	for rd.total.Load() < r.expected && time.Now().Before(wait) {
		time.Sleep(50 * time.Millisecond)
	}
	rd.stop()
	phase("counted")
	r.outputs = rd.total.Load()
	r.lat = rd.latencies()
	if f := rd.firstAt.Load(); f != 0 {
		r.first = time.Unix(0, f).Sub(start)
	}
	if err := rd.writeSamples(strings.TrimSuffix(s.log, ".log") + ".latency.csv"); err != nil {
		r.warnings = append(r.warnings, err.Error())
	}
	if why := unknownVar(s); why != "" {
		r.unavailable = why
		return r
	}
	if got := len(r.lat); got < n {
		r.warnings = append(r.warnings, fmt.Sprintf("latency: %d of %d live records seen on the output", got, n))
	}
	if r.outputs != r.expected {
		r.warnings = append(r.warnings, fmt.Sprintf("the reader saw %d output records, %d went in", r.outputs, r.expected))
	}
	if st := rd.stamped.Load(); st > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("%d backlog outputs carry a new timestamp, not the input's", st))
	}
	p50, p99 := percentile(r.lat, 0.50), percentile(r.lat, 0.99)
	say("%s: %.0f records/s, first output after %.1fs, %.1f CPU s/M, RSS %d MiB, latency p50 %s p99 %s%s", label,
		float64(s.in.records)/r.wall.Seconds(), r.first.Seconds(), r.cpu/float64(s.in.records)*1e6, r.hwm>>20,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), warnSuffix(r.warnings))
	fmt.Fprintf(logf, "\nbench: phases: %s\n", strings.Join(phases, ", "))
	if ws := strings.Join(r.warnings, "; "); ws != "" {
		fmt.Fprintf(logf, "bench: %s\n", ws)
	}
	return r
}

func warnSuffix(ws []string) string {
	if len(ws) == 0 {
		return ""
	}
	return " (warning: " + strings.Join(ws, "; ") + ")"
}

// drained reports whether the group's committed offsets on the input topic
// have reached the input's end offsets on every partition.
func drained(ctx context.Context, b *broker, s *runSpec) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	offs, err := b.adm.FetchOffsets(ctx, s.group)
	if err != nil {
		return false, err
	}
	for p, end := range s.in.ends {
		o, ok := offs.Lookup(s.in.topic, p)
		if !ok || o.Err != nil || o.At < end {
			return false, nil
		}
	}
	return true, nil
}

// unknownVar says why the run does not count if the processor logged that
// it ignores one of the settings the system needs.
func unknownVar(s *runSpec) string {
	if len(s.sys.needs) == 0 {
		return ""
	}
	b, err := os.ReadFile(s.log)
	if err != nil {
		return ""
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(line, []byte("ignoring an unknown variable")) {
			continue
		}
		for _, v := range s.sys.needs {
			if bytes.Contains(line, []byte(`"`+v+`"`)) || bytes.Contains(line, []byte("="+v)) {
				return fmt.Sprintf("the processor logs that it ignores %s (not implemented in this build)", v)
			}
		}
	}
	return ""
}

// rejected says why the run does not count if the processor exited with
// a configuration error (exit code 2) about one of the settings the system
// needs: it knows the variable but not yet the value.
func rejected(s *runSpec, cmd *exec.Cmd) string {
	if len(s.sys.needs) == 0 || cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 {
		return ""
	}
	b, _ := os.ReadFile(s.log)
	for _, line := range strings.Split(string(b), "\n") {
		for _, v := range s.sys.needs {
			if strings.Contains(line, v) && strings.Contains(line, "configuration error") {
				return "the processor rejects the setting: " + strings.TrimSpace(line)
			}
		}
	}
	return ""
}

// cpuSeconds is utime+stime of the process and of its waited-for children.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	var ticks int64
	for _, k := range []int{14, 15, 16, 17} { // utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[k-3], 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return float64(ticks) / clockTicks, nil
}

// peakRSS is VmHWM from /proc/<pid>/status, in bytes.
func peakRSS(pid int) (int64, error) {
	return procBytes("/proc/"+strconv.Itoa(pid)+"/status", "VmHWM")
}

// procBytes reads the line "key: N kB" of a /proc file such as
// /proc/meminfo, and returns N in bytes.
func procBytes(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in %s", key, path)
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// reader reads the output topic read_committed from the start, counts
// every record, and for records stamped at or after liveFrom records how
// long ago (now - record timestamp) they were stamped.
type reader struct {
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
	start    atomic.Int64 // UnixMilli of the run's start
	firstAt  atomic.Int64 // UnixNano when the first record was seen
	liveFrom atomic.Int64 // UnixMilli; 0 until the latency phase

	total, live, stamped atomic.Int64
	mu                   sync.Mutex
	lat                  []time.Duration
	stamps               []int64 // UnixMilli timestamps of the live records, as lat
}

func startReader(b *broker, topic string) (*reader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	rd := &reader{cl: cl, cancel: cancel, done: make(chan struct{})}
	rd.start.Store(time.Now().Add(time.Hour).UnixMilli())
	go func() {
		defer close(rd.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			from, start := rd.liveFrom.Load(), rd.start.Load()
			if fs.NumRecords() > 0 {
				rd.firstAt.CompareAndSwap(0, now.UnixNano())
			}
			fs.EachRecord(func(r *kgo.Record) {
				rd.total.Add(1)
				ts := r.Timestamp.UnixMilli()
				switch {
				case from != 0 && ts >= from:
					rd.live.Add(1)
					rd.mu.Lock()
					rd.lat = append(rd.lat, now.Sub(r.Timestamp))
					rd.stamps = append(rd.stamps, ts)
					rd.mu.Unlock()
				case ts >= start:
					rd.stamped.Add(1)
				}
			})
		}
	}()
	return rd, nil
}

func (rd *reader) setStart(t time.Time)    { rd.start.Store(t.UnixMilli()) }
func (rd *reader) setLiveFrom(t time.Time) { rd.liveFrom.Store(t.UnixMilli()) }

func (rd *reader) stop() {
	if rd.cancel == nil {
		return
	}
	rd.cancel()
	<-rd.done
	rd.cl.Close()
	rd.cancel = nil
}

func (rd *reader) latencies() []time.Duration {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return slices.Clone(rd.lat)
}

// writeSamples writes every latency sample, in the order seen, as CSV:
// milliseconds since the first live record's timestamp, and the latency
// in milliseconds.
func (rd *reader) writeSamples(path string) error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	var b strings.Builder
	b.WriteString("stamped_ms,latency_ms\n")
	from := rd.liveFrom.Load()
	for i, d := range rd.lat {
		fmt.Fprintf(&b, "%d,%.3f\n", rd.stamps[i]-from, float64(d.Microseconds())/1000)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// percentile is the nearest-rank percentile of ds (0 if empty).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
