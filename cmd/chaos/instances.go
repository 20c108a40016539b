package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/streamproc/processor/internal/launch"
)

// startNew starts a processor under the next id and returns the id.
func (d *driver) startNew() int {
	d.mu.Lock()
	d.nextID++
	id := d.nextID
	d.mu.Unlock()
	d.start(id)
	return id
}

// start starts (or restarts) processor id, its log appended to
// processor-<id>.log; when it exits without being told to, the exit is
// noted as unexpected and it is started again.
func (d *driver) start(id int) {
	inst := &instance{id: id}
	c := d.instance(id).Command(filepath.Join(d.o.bin, "processor"), launch.PathOnly)
	// The log file is the process's stderr itself: nothing of ours sits
	// between a processor and its log, so a slow reader can never block it.
	c.Log = filepath.Join(d.o.logDir, fmt.Sprintf("processor-%d.log", id))
	p, err := launch.Start(context.Background(), c)
	if err != nil {
		fatal(fmt.Errorf("processor %d: %w", id, err))
	}
	inst.proc = p
	go inst.watchLog(p.Log(), p.LogFrom())
	go func() {
		<-p.Done()
		if !inst.expectExit.Load() {
			d.mu.Lock()
			d.unexpected = append(d.unexpected, fmt.Sprintf("processor %d exited on its own: %v (log %s)", id, p.Err(), p.Log()))
			d.mu.Unlock()
			d.log.Error("processor exited on its own; restarting it", "instance", id, "err", fmt.Sprint(p.Err()))
			d.start(id)
		}
	}()
	d.mu.Lock()
	d.insts[id] = inst
	d.mu.Unlock()
}

// instance describes processor id: the drill's group, topics or tables,
// timings, chain and the id's policy; its transactional and static member
// IDs are stable across its restarts.
func (d *driver) instance(id int) launch.Instance {
	in := launch.Instance{
		Brokers:            d.brokers,
		Group:              d.group,
		InputTopics:        []string{d.in},
		TransactionalID:    fmt.Sprintf("%s-%d", d.group, id),
		InstanceID:         fmt.Sprintf("%s-%d", d.group, id),
		SessionTimeout:     d.o.sessionTimeout,
		TransactionTimeout: d.o.txnTimeout,
		CommitInterval:     200 * time.Millisecond,
		// Two workers share each poll's records (the default on 2 cores,
		// set so that the drill runs them on any machine): the backlogs
		// the faults leave behind make polls of hundreds of records.
		Workers:          2,
		HTTPAddr:         "127.0.0.1:0",
		ProgressInterval: 250 * time.Millisecond,
		LogFormat:        "json",
		Transforms:       d.o.transforms,
		Guarantee:        d.o.guarantee,
		OnError:          d.policy(id),
		Settings:         map[string]string{},
	}
	if d.o.sink == "postgres" {
		in.Sink = "postgres"
		in.Settings["PROCESSOR_POSTGRES_URL"] = withAppName(d.o.pgURL, d.appName(id))
		in.Settings["PROCESSOR_POSTGRES_TABLE"] = d.table
		in.Settings["PROCESSOR_POSTGRES_DEAD_LETTER_TABLE"] = d.deadTable
	} else {
		in.OutputTopic = d.out
	}
	if slices.Contains(d.o.faults, "abort") {
		in.Extra = append(in.Extra, fmt.Sprintf("PROCESSOR_TEST_ABORT_RATE=%g", d.o.abortRate))
	}
	if slices.Contains(d.o.transforms, "jq") {
		in.Settings["PROCESSOR_JQ_EXPR"] = d.o.jqExpr
	}
	if d.o.ordering != "" {
		in.Extra = append(in.Extra, "PROCESSOR_ORDERING="+d.o.ordering)
	}
	if d.svc != nil {
		d.svc.settings(in.Settings, d.o.ordering)
	}
	if d.o.stateful() {
		d.statefulSettings(&in, id)
	}
	if d.o.valueFormat == "avro" {
		// The output values' format and subject are the defaults:
		// avro, like the input's, and <output topic>-value.
		in.Extra = append(in.Extra, "PROCESSOR_VALUE_FORMAT=avro", "PROCESSOR_SCHEMA_REGISTRY_URL="+d.registryURL)
	}
	if in.OnError == "dlq" && d.dlq != "" {
		in.DLQTopic = d.dlq
	}
	in.Extra = append(in.Extra, d.o.env...) // last: -env wins
	return in
}

// statefulSettings sets the settings of the drill's stateful chains on
// instance id.
func (d *driver) statefulSettings(in *launch.Instance, id int) {
	// A count by record key (BY unset), which reads no value; the
	// state directory is the instance's own and outlives its
	// restarts, so a SIGKILLed one restores only the changelogs'
	// tail (the wipe fault deletes it).
	switch d.o.counter() {
	case "join":
		d.joinSettings(in.Settings)
	case "dedupe":
		// Every seq is one input's, in one partition: no repartition
		// hop is needed, and none reorders the records.
		in.Settings["PROCESSOR_DEDUPE_BY"] = ".seq"
		in.Settings["PROCESSOR_DEDUPE_PARTITIONED_BY_KEY"] = "true"
		if d.o.duplicates() {
			// Re-sent inputs: those stamped back are late, to the late topic.
			in.Settings["PROCESSOR_DEDUPE_GRACE"] = dedupeGrace.String()
			in.Extra = append(in.Extra, "PROCESSOR_LATE_TOPIC="+d.late)
		}
	case "wasm":
		in.Settings["PROCESSOR_WASM_MODULE"] = d.o.wasmModule
		in.Settings["PROCESSOR_WASM_STORES"] = "counts"
		in.Settings["PROCESSOR_WASM_STATE_BY_KEY"] = "true"
		in.Settings["PROCESSOR_WASM_TIMEOUT"] = "500ms" // a loaded machine is no guest's fault; four attempts fit the drill's budget
	default:
		in.Settings["PROCESSOR_AGGREGATE_FUNCTION"] = "count"
		if d.o.grouped() {
			// Orders keyed by order id, counted per customer.
			in.Settings["PROCESSOR_AGGREGATE_BY"] = groupField
		}
	}
	if d.o.window > 0 {
		w := d.o.window.String()
		in.Settings["PROCESSOR_AGGREGATE_WINDOW"], in.Settings["PROCESSOR_AGGREGATE_GRACE"] = w, w
		in.Settings["PROCESSOR_AGGREGATE_EMIT"] = "close"
		in.Extra = append(in.Extra, "PROCESSOR_LATE_TOPIC="+d.late)
	}
	in.Extra = append(in.Extra, "PROCESSOR_STATE_DIR="+d.stateDir(id))
}

// stateDir returns instance id's PROCESSOR_STATE_DIR in the stateful
// mode.
func (d *driver) stateDir(id int) string {
	return filepath.Join(d.o.stateDir, fmt.Sprintf("instance-%d", id))
}

// policy returns instance id's error policy: the policies in turn by
// instance number, so a restart keeps its policy.
func (d *driver) policy(id int) string {
	return d.o.policies[(id-1)%len(d.o.policies)]
}

// watchLog follows the instance's log file from offset from, noting when
// the process has started and when it first committed.
func (inst *instance) watchLog(path string, from int64) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	var partial string
	for {
		line, err := r.ReadString('\n')
		if err != nil { // no complete line yet
			partial += line
			select {
			case <-inst.proc.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		line, partial = partial+line, ""
		if !inst.started.Load() && strings.Contains(line, `"msg":"processor starting"`) {
			inst.started.Store(true)
		}
		if inst.firstCommit.Load() == 0 && strings.Contains(line, `"msg":"progress"`) && !strings.Contains(line, `"committed":0,`) {
			inst.firstCommit.Store(time.Now().UnixNano())
		}
		if inst.started.Load() && inst.firstCommit.Load() != 0 {
			return // nothing more to learn
		}
	}
}

// pick returns one of the running instances, drawn by the seed.
func (d *driver) pick() *instance {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := slices.Sorted(maps.Keys(d.insts))
	return d.insts[ids[d.rng.IntN(len(ids))]]
}

// stop ends inst with sig and waits; SIGTERM must end in exit 0.
func (d *driver) stop(inst *instance, sig syscall.Signal) {
	inst.expectExit.Store(true)
	// A process signalled before Go's runtime installed its handlers dies
	// of the signal; wait for the first log line of a fresh one.
	for deadline := time.Now().Add(10 * time.Second); !inst.started.Load() && time.Now().Before(deadline); {
		select {
		case <-inst.proc.Done():
			deadline = time.Time{} // already gone
		case <-time.After(10 * time.Millisecond):
		}
	}
	if within := d.o.sessionTimeout + 30*time.Second; !inst.proc.Stop(sig, within) {
		d.mu.Lock()
		d.unexpected = append(d.unexpected, fmt.Sprintf("processor %d did not exit within %s of %s", inst.id, within, sig))
		d.mu.Unlock()
	}
	if err := inst.proc.Err(); sig == syscall.SIGTERM && err != nil {
		d.mu.Lock()
		d.unexpected = append(d.unexpected, fmt.Sprintf("processor %d exited with %v after SIGTERM, want 0", inst.id, err))
		d.mu.Unlock()
	}
}

// stopAll stops every instance with SIGTERM, all at once.
func (d *driver) stopAll() {
	d.mu.Lock()
	insts := make([]*instance, 0, len(d.insts))
	for _, inst := range d.insts {
		insts = append(insts, inst)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, inst := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.stop(inst, syscall.SIGTERM)
		}()
	}
	wg.Wait()
}
