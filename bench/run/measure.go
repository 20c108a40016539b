package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/repartition"
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
	ready    time.Duration // with -crash: from the restart after SIGKILL to the first new output
	restored int64         // with a restart after SIGKILL: changelog records its restores logged; -1 when none
	outputs  int64         // output records a read_committed reader saw
	expected int64         // input records, the warm-up and the latency phase's
	warnings []string
}

// measurement is one runOne in progress: the run, what it measured so
// far, and the clients and process it holds.
type measurement struct {
	o      options
	e      *environment
	b      *broker
	s      *runSpec
	r      *result
	label  string
	t0     time.Time
	phases []string

	rd    *reader
	pr    *kgo.Client     // the latency phase's producer
	proc  *launch.Process // the system under test
	start time.Time       // when it was started

	stopped bool
}

// runOne runs one system on one input with one commit interval:
//
//  1. creates its output topic and its "live" topic (a second input, empty
//     but for one warm-up record, written to only in step 5); a stateful
//     row (ownInput) instead pre-loads a copy of the input for itself,
//     which is also its live topic (the warm-up record after the
//     pre-loaded end),
//  2. starts a read_committed reader on the output topic,
//  3. starts the system and polls the group's committed offsets (kadm)
//     until they reach the input's end offsets: the drain; its wall time,
//     the process's CPU time and peak RSS at that moment are the
//     throughput figures,
//  4. (the system now idles, caught up)
//  5. writes records at a steady rate to the live topic, each stamped with
//     the time it is produced, and the reader records now - timestamp for
//     each of them on the output: the end-to-end latency,
//     5b. with -crash, kills it (SIGKILL), restarts it and measures the
//     time until it is ready again (recoverPhase),
//  6. stops the system (SIGTERM) and checks that the reader saw as many
//     output records as went in.
func runOne(ctx context.Context, o options, e *environment, b *broker, s *runSpec) *result {
	m := &measurement{o: o, e: e, b: b, s: s, r: &result{spec: s}, t0: time.Now(),
		label: fmt.Sprintf("round %d/%d, %d B, commit %s, %s", s.round, o.rounds, s.in.size, s.interval, s.sys.label)}
	defer m.close()
	if err := m.prepare(ctx); err != nil {
		return m.fail("%v", err)
	}
	m.phase("ready")
	// One output per input, the warm-up record's included: every row's
	// chain emits one (aggregate its updated sum; dedupe by order id
	// filters nothing, every order's id being its own).
	m.r.expected = int64(s.in.records) + 1
	if s.sys.window > 0 {
		m.r.expected = 0 // one per key and window: not counted
	}
	if err := m.startSystem(); err != nil {
		return m.fail("%v", err)
	}
	if done := m.drain(ctx); done != nil {
		return done
	}
	if done := m.latencyPhase(ctx); done != nil {
		return done
	}
	if done := m.recoverPhase(ctx); done != nil {
		return done
	}
	m.count()
	return m.r
}

// phase notes that a phase of the run ended, for the log: seconds since
// the run began, and the wall clock (UTC), which the system's own log
// lines can be read against.
func (m *measurement) phase(name string) {
	now := time.Now()
	m.phases = append(m.phases, fmt.Sprintf("%s %.2fs (%s)", name, now.Sub(m.t0).Seconds(), now.UTC().Format("15:04:05.000")))
}

// fail ends the run as failed, saying why.
func (m *measurement) fail(format string, args ...any) *result {
	m.r.err = fmt.Sprintf(format, args...)
	say("%s: FAILED: %s (log: %s)", m.label, m.r.err, m.s.log)
	return m.r
}

// unavailable ends the run as not counting when the processor said it
// does not take a setting the system needs; nil when it did not.
func (m *measurement) unavailable() *result {
	if why := unknownVar(m.s); why != "" {
		m.r.unavailable = why
		return m.r
	}
	return nil
}

// prepare does steps 1 and 2: the output and live topics, the reader, and
// the latency phase's producer with its warm-up record written.
func (m *measurement) prepare(ctx context.Context) error {
	s := m.s
	topics := []string{s.out, s.live}
	if s.sys.ownInput {
		partitions := m.o.partitions
		if s.sys.onePartition {
			partitions = 1
		}
		if err := preloadOne(ctx, partitions, m.b, s.in, new([]string)); err != nil {
			return err
		}
		topics = topics[:1] // live is the input, just filled
	}
	if err := m.b.createTopics(ctx, m.o.partitions, topics...); err != nil {
		return err
	}
	rd, err := startReader(m.b, s.out)
	if err != nil {
		return fmt.Errorf("starting the reader: %w", err)
	}
	m.rd = rd
	pr, err := kgo.NewClient(kgo.SeedBrokers(m.b.addrs...), kgo.DefaultProduceTopic(s.live), kgo.ProducerLinger(0),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	m.pr = pr
	// The warm-up record: the producer's connection, producer ID and
	// metadata are in place before the latency phase.
	if err := pr.ProduceSync(ctx, s.in.record(-1)).FirstErr(); err != nil {
		return fmt.Errorf("writing the warm-up record to %s: %w", s.live, err)
	}
	return nil
}

// startSystem starts the system under test, its stdout and stderr in the
// run's log, in a process group of its own.
func (m *measurement) startSystem() error {
	c, err := m.s.sys.cmd(m.e, m.b, m.s, m.o.processorEx)
	if err != nil {
		return err
	}
	c.Log, c.Truncate, c.Stdout, c.OwnGroup = m.s.log, true, true, true
	m.start = time.Now()
	m.rd.setStart(m.start)
	// Not bound to ctx: an interrupted run stops the system with SIGTERM
	// (close), as any other.
	p, err := launch.Start(context.Background(), c)
	if err != nil {
		return err // "starting <binary>: ..."
	}
	m.proc = p
	return nil
}

// stop stops the system (SIGTERM; killed after 30 s), once.
func (m *measurement) stop() {
	if m.proc == nil || m.stopped {
		return
	}
	m.stopped = true
	if !m.proc.Stop(syscall.SIGTERM, 30*time.Second) {
		m.r.warnings = append(m.r.warnings, "did not stop within 30 s of SIGTERM; killed")
	}
}

// close stops the system and closes the clients.
func (m *measurement) close() {
	m.stop()
	if m.pr != nil {
		m.pr.Close()
	}
	if m.rd != nil {
		m.rd.stop()
	}
}

// drain is step 3: it polls the group's committed offsets until they reach
// the input's end, then takes the wall time, CPU time and peak RSS. It
// returns the result when the run ends there, nil to go on.
func (m *measurement) drain(ctx context.Context) *result {
	deadline := m.start.Add(drainTimeout(m.o, m.s))
	for {
		if r := m.unavailable(); r != nil {
			return r
		}
		if done, err := drained(ctx, m.b, m.s); err == nil && done {
			break
		}
		select {
		case <-m.proc.Done():
			if r := m.unavailable(); r != nil {
				return r
			}
			if why := rejected(m.s, m.proc); why != "" {
				m.r.unavailable = why
				return m.r
			}
			return m.fail("exited before the drain ended (%v): %s", m.proc.Err(), logTail(m.s.log))
		case <-ctx.Done():
			return m.fail("interrupted")
		default:
		}
		if time.Now().After(deadline) {
			return m.fail("not drained within %s", m.o.runTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.r.wall = time.Since(m.start)
	m.phase("drained")
	var err1, err2 error
	m.r.cpu, err1 = cpuSeconds(m.proc.Pid())
	m.r.hwm, err2 = peakRSS(m.proc.Pid())
	if err := errors.Join(err1, err2); err != nil {
		return m.fail("reading /proc: %v", err)
	}
	return nil
}

// latencyPhase is step 5: records written at a steady rate to the live
// topic, and a wait for the reader to see them on the output. A restore
// row writes for updatesFor and does not wait: the recovery phase kills
// the system while they still flow. It returns the result when the run
// ends there, nil to go on.
func (m *measurement) latencyPhase(ctx context.Context) *result {
	o, s, rd := m.o, m.s, m.rd
	liveFor := o.liveFor
	if s.sys.restore {
		liveFor = updatesFor
	}
	n := int(float64(o.liveRate) * liveFor.Seconds())
	liveStart := time.Now()
	rd.setLiveFrom(liveStart.Truncate(time.Millisecond))
	every := time.Second / time.Duration(o.liveRate)
	for i := range n {
		if d := time.Until(liveStart.Add(time.Duration(i) * every)); d > 0 {
			time.Sleep(d)
		}
		m.pr.Produce(ctx, s.in.record(int64(s.in.records+i)), nil)
	}
	if err := m.pr.Flush(ctx); err != nil {
		return m.fail("latency phase: %v", err)
	}
	m.r.liveSent = n
	m.phase("written")
	if s.sys.restore {
		m.r.expected += int64(n)
		return nil
	}
	wait := time.Now().Add(2*s.interval + 15*time.Second)
	want := int64(n)
	if w := s.sys.window; w > 0 {
		// The windows the live records closed: every one before the last
		// record's, whose rows come within a commit or two.
		want, wait = math.MaxInt64, time.Now().Add(2*s.interval+w+2*time.Second)
	} else {
		m.r.expected += int64(n)
	}
	for rd.live.Load() < want && time.Now().Before(wait) {
		select {
		case <-m.proc.Done():
			return m.fail("exited during the latency phase (%v): %s", m.proc.Err(), logTail(s.log))
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// count is step 6: it stops the system, counts the outputs, and reports
// the run on stderr and in its log.
func (m *measurement) count() {
	r, s, rd := m.r, m.s, m.rd
	m.phase("seen")
	m.stop()
	m.phase("stopped")
	wait := time.Now().Add(5 * time.Second)
	for rd.total.Load() < r.expected && time.Now().Before(wait) {
		time.Sleep(50 * time.Millisecond)
	}
	rd.stop()
	m.phase("counted")
	r.outputs = rd.total.Load()
	if r.lat == nil { // the recovery phase took them before its probes
		r.lat = rd.latencies()
	}
	if f := rd.firstAt.Load(); f != 0 {
		r.first = time.Unix(0, f).Sub(m.start)
	}
	if err := rd.writeSamples(strings.TrimSuffix(s.log, ".log") + ".latency.csv"); err != nil {
		r.warnings = append(r.warnings, err.Error())
	}
	if m.unavailable() != nil {
		return
	}
	m.warn()
	p50, p99 := percentile(r.lat, 0.50), percentile(r.lat, 0.99)
	say("%s: %.0f records/s, first output after %.1fs, %.1f CPU s/M, RSS %d MiB, latency p50 %s p99 %s%s", m.label,
		float64(s.in.records)/r.wall.Seconds(), r.first.Seconds(), r.cpu/float64(s.in.records)*1e6, r.hwm>>20,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), warnSuffix(r.warnings))
	m.logFooter()
}

// warn notes what the counts say is off: latency samples missing, outputs
// not matching the inputs, backlog outputs restamped.
func (m *measurement) warn() {
	r := m.r
	if m.s.sys.restore {
		// Killed while the updates flowed: their outputs come after the
		// restart, so they are neither latencies nor backlog; the count
		// below still holds them.
		if r.outputs != r.expected {
			r.warnings = append(r.warnings, fmt.Sprintf("the reader saw %d output records, %d went in", r.outputs, r.expected))
		}
		return
	}
	if m.s.sys.window > 0 {
		if len(r.lat) == 0 {
			r.warnings = append(r.warnings, "latency: no window closed by the live records was seen on the output")
		}
	} else if got := len(r.lat); got < r.liveSent {
		r.warnings = append(r.warnings, fmt.Sprintf("latency: %d of %d live records seen on the output", got, r.liveSent))
	}
	if m.s.sys.window == 0 && r.outputs != r.expected {
		r.warnings = append(r.warnings, fmt.Sprintf("the reader saw %d output records, %d went in", r.outputs, r.expected))
	}
	if st := m.rd.stamped.Load(); st > 0 && m.s.sys.window == 0 { // a window's row is stamped with its end
		r.warnings = append(r.warnings, fmt.Sprintf("%d backlog outputs carry a new timestamp, not the input's", st))
	}
}

// logFooter appends the phases and warnings to the run's log.
func (m *measurement) logFooter() {
	logf, err := os.OpenFile(m.s.log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\nbench: phases: %s\n", strings.Join(m.phases, ", "))
	if ws := strings.Join(m.r.warnings, "; "); ws != "" {
		fmt.Fprintf(logf, "bench: %s\n", ws)
	}
}

// drainTimeout is how long the drain of s may take: -run-timeout, or for a
// row whose own input holds more records than -records, the default
// timeout for that many.
func drainTimeout(o options, s *runSpec) time.Duration {
	if s.in.records > o.records {
		return max(o.runTimeout, 2*time.Minute+time.Duration(s.in.records)*time.Millisecond)
	}
	return o.runTimeout
}

func warnSuffix(ws []string) string {
	if len(ws) == 0 {
		return ""
	}
	return " (warning: " + strings.Join(ws, "; ") + ")"
}

// drained reports whether the group's committed offsets on the input topic
// have reached the input's end offsets on every partition, and, for a row
// with a repartition hop, whether the group has consumed the hop's
// records as well (repartition.CaughtUp).
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
	if !s.sys.ownInput { // a stateless row has no hop
		return true, nil
	}
	return repartition.CaughtUp(ctx, b.adm, s.group, offs)
}
