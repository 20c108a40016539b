package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/streamproc/processor/internal/launch"
)

// probeEvery is how often the recovery phase writes a probe record.
const probeEvery = 10 * time.Millisecond

// crashes reports whether the run of s has a recovery phase: -crash is
// set or s is a restore row, and the row emits one output per input (a
// window row emits when a window closes, so no one record tells when it
// is ready again).
func crashes(o options, s *runSpec) bool { return (o.crash || s.sys.restore) && s.sys.window == 0 }

// recoverPhase is step 5b, with -crash or on a restore row: after the
// latency phase it kills the system (SIGKILL, no shutdown), starts it
// again with the same group (a static member: runSpec.member), settings
// and state directory (wiped first on a -wiped restore row), and writes
// a probe record every probeEvery to the live topic; the time from the
// restart until the reader sees the first probe on the output is the time
// to ready after a crash (start, group join, restoring or checking the
// state, the first transaction). It then waits for every probe, so that
// the output count check covers the crash too, and reads from the log
// how many changelog records the restart restored. It returns the result
// when the run ends there, nil to go on.
func (m *measurement) recoverPhase(ctx context.Context) *result {
	if !crashes(m.o, m.s) {
		return nil
	}
	o, s, rd := m.o, m.s, m.rd
	m.r.lat = rd.latencies() // the latency phase's samples; the probes' are not latencies
	if !m.proc.Stop(syscall.SIGKILL, 10*time.Second) {
		return m.fail("did not exit on SIGKILL")
	}
	m.phase("killed")
	if s.sys.wipe {
		if err := wipeState(s.stateDir); err != nil {
			return m.fail("%v", err)
		}
	}
	logFrom := logSize(s.log)
	c, err := s.sys.cmd(m.e, m.b, s, o.processorEx)
	if err != nil {
		return m.fail("restarting: %v", err)
	}
	c.Log, c.Stdout, c.OwnGroup = s.log, true, true // appended to the first run's log
	t0 := time.Now()
	// From now on only the probes count as live: a late record of the
	// latency phase does not pass for the first output after the restart.
	rd.setLiveFrom(t0.Truncate(time.Millisecond))
	before := rd.live.Load()
	m.phase("restarting")
	p, err := launch.Start(context.Background(), c)
	if err != nil {
		return m.fail("restarting: %v", err)
	}
	m.proc = p
	deadline := t0.Add(o.runTimeout)
	probes := 0
	for rd.live.Load() == before {
		select {
		case <-p.Done():
			return m.fail("exited after the restart (%v): %s", p.Err(), logTail(s.log))
		case <-ctx.Done():
			return m.fail("interrupted")
		default:
		}
		if time.Now().After(deadline) {
			return m.fail("no output within %s of the restart after a crash", o.runTimeout)
		}
		m.pr.Produce(ctx, s.in.record(int64(s.in.records+m.r.liveSent+probes)), nil)
		probes++
		time.Sleep(probeEvery)
	}
	m.r.ready = time.Since(t0)
	m.phase("ready again")
	say("%s: ready %.1fs after a restart after SIGKILL", m.label, m.r.ready.Seconds())
	if err := m.pr.Flush(ctx); err != nil {
		return m.fail("recovery phase: %v", err)
	}
	m.r.expected += int64(probes)
	want := before + int64(probes)
	wait := time.Now().Add(2*s.interval + 15*time.Second)
	for rd.live.Load() < want && time.Now().Before(wait) {
		time.Sleep(20 * time.Millisecond)
	}
	n, err := restoredSince(s.log, logFrom)
	if err != nil {
		m.r.warnings = append(m.r.warnings, fmt.Sprintf("reading the restores from the log: %v", err))
	}
	m.r.restored = n
	if n >= 0 {
		say("%s: the restart restored %d changelog records", m.label, n)
	}
	return nil
}
