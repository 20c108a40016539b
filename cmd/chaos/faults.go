package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// apply applies one fault (see the package comment).
func (d *driver) apply(fault string) {
	switch fault {
	case "kill":
		d.kill()
	case "term":
		d.term()
	case "stop":
		inst := d.pick()
		_ = inst.proc.Signal(syscall.SIGSTOP)
		time.Sleep(d.o.sessionTimeout + 2*time.Second)
		_ = inst.proc.Signal(syscall.SIGCONT)
	case "scale":
		d.scale()
	case "broker":
		d.restartBroker()
	case "pgrestart":
		d.restartPostgres()
	case "pgslow":
		d.slowPostgres()
	case "pgfreeze":
		d.freezePostgres()
	case "wipe":
		d.wipe()
	case "httpdown":
		d.httpDown()
	}
}

// wipe is the wipe fault of the stateful mode: SIGKILL an instance,
// delete its state directory and restart it under the same IDs, so that
// it rebuilds every partition it is given from the changelogs. The
// restart's log is noted, for the report to find the rebuild in.
func (d *driver) wipe() {
	inst := d.pick()
	d.stop(inst, syscall.SIGKILL)
	if err := os.RemoveAll(d.stateDir(inst.id)); err != nil {
		fatal(fmt.Errorf("wiping the state of processor %d: %w", inst.id, err))
	}
	d.start(inst.id)
	d.mu.Lock()
	fresh := d.insts[inst.id]
	d.wiped = append(d.wiped, wipedLog{id: inst.id, path: fresh.proc.Log(), from: fresh.proc.LogFrom()})
	d.mu.Unlock()
}

// kill is the kill fault: SIGKILL an instance and restart it under the
// same IDs, measuring in the background how long the fresh process takes
// to commit.
func (d *driver) kill() {
	inst := d.pick()
	d.stop(inst, syscall.SIGKILL)
	restarted := time.Now()
	d.start(inst.id)
	d.mu.Lock()
	fresh := d.insts[inst.id]
	d.mu.Unlock()
	go func() {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if t := fresh.firstCommit.Load(); t != 0 {
				d.mu.Lock()
				d.recoveries = append(d.recoveries, time.Unix(0, t).Sub(restarted))
				d.mu.Unlock()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

// term is the term fault: freeze an instance while input piles up, then
// SIGTERM it as it works through the backlog (it must exit 0), and restart
// it.
func (d *driver) term() {
	inst := d.pick()
	if d.o.termBacklog > 0 {
		// Let input pile up, then signal the instance while it
		// works through it: the SIGTERM lands mid-batch.
		_ = inst.proc.Signal(syscall.SIGSTOP)
		time.Sleep(d.o.termBacklog)
		_ = inst.proc.Signal(syscall.SIGCONT)
		time.Sleep(time.Duration(d.rng.IntN(20)) * time.Millisecond)
	}
	d.stop(inst, syscall.SIGTERM)
	d.start(inst.id)
}

// scale is the scale fault: start one more instance, or, when one was
// started so, stop it again.
func (d *driver) scale() {
	d.mu.Lock()
	n := len(d.extra)
	d.mu.Unlock()
	if n == 0 {
		id := d.startNew()
		d.mu.Lock()
		d.extra = append(d.extra, id)
		d.mu.Unlock()
		d.log.Info("scaled out", "instance", id)
		return
	}
	d.mu.Lock()
	id := d.extra[n-1]
	d.extra = d.extra[:n-1]
	inst := d.insts[id]
	delete(d.insts, id)
	d.mu.Unlock()
	d.stop(inst, syscall.SIGTERM)
	d.log.Info("scaled in", "instance", id)
}
