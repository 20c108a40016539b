package main

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/schema"
)

// driver runs one drill: the broker, the instances, the input, the faults
// and what they measured.
type driver struct {
	o   options
	log *slog.Logger
	rng *rand.Rand

	brokers    []string
	broker     *launch.Process // the devbroker, with -embedded
	brokerAddr string
	brokerDir  string

	group, in, out string
	dlq            string // the dead-letter topic, when a policy is dlq
	late           string // PROCESSOR_LATE_TOPIC, with -window

	// With join in the chain: the table topic and what was written to
	// it (join.go).
	joinTable  string
	tableStats tableWrites

	// With -sink postgres: the run's tables, the database they are in,
	// how often pgrestart ran each shutdown mode, how long the script
	// took to restart the server, and how long after each restart the
	// group's stored offsets moved again.
	table, deadTable string
	pool             *pgxpool.Pool
	pgRestarts       map[string]int
	pgDowntimes      []time.Duration
	pgRecoveries     []time.Duration
	// pgFreezes: after each pgfreeze, how long until every partition
	// was stored again by the others while the frozen one slept.
	pgFreezes []time.Duration

	// With -value-format avro: the registry's URL (the processors'
	// PROCESSOR_SCHEMA_REGISTRY_URL) and a client of it, the input
	// subject's versions (the second once registered, under mu) and the
	// output subject's.
	registryURL string
	reg         schema.Registry
	inSubjects  []schema.Subject
	outSubject  schema.Subject

	// With http in the chain: the service the instances call
	// (httpsvc.go).
	svc *httpService

	mu         sync.Mutex
	insts      map[int]*instance
	nextID     int
	extra      []int // instances started by scale-out
	unexpected []string
	recoveries []time.Duration
	applied    map[string]int
	// poisonWritten counts the marked inputs written, per class and per
	// "class/variant".
	poisonWritten map[string]int
	// dupSummary describes the duplicates written, in the dedupe mode.
	dupSummary string
	// wiped are the restarts after a wipe fault, in the stateful mode.
	wiped []wipedLog
}

// wipedLog is where in its log a restart with a wiped state directory
// begins.
type wipedLog struct {
	id   int
	path string
	from int64
}

// instance is one processor process; a restart replaces it under the same
// id.
type instance struct {
	id          int
	proc        *launch.Process
	expectExit  atomic.Bool
	started     atomic.Bool  // it logged "processor starting": its signal handling is up
	firstCommit atomic.Int64 // unix nanos of its first progress line with a commit
}

// run is the whole drill: it returns the exit code.
func (d *driver) run() int {
	d.applied = map[string]int{}
	if d.o.embedded {
		if err := d.startBroker(); err != nil {
			d.log.Error("starting the devbroker", "err", err.Error())
			return 1
		}
		defer d.stopBroker()
	} else {
		d.brokers = strings.Split(d.o.brokers, ",")
	}
	suffix := strconv.FormatUint(d.rng.Uint64()%1_000_000, 36)
	d.group, d.in, d.out = "chaos-"+suffix, "chaos-in-"+suffix, "chaos-out-"+suffix
	if d.o.sink == "postgres" {
		// No output or dead-letter topic: tables of the run's own.
		d.out, d.table, d.deadTable = "", "chaos_"+suffix, "chaos_dl_"+suffix
		d.pgRestarts = map[string]int{}
		pool, err := d.openDatabase()
		if err != nil {
			d.log.Error("PostgreSQL", "err", err.Error())
			return 1
		}
		d.pool = pool
		defer pool.Close()
		if err := d.checkFresh(); err != nil {
			d.log.Error("PostgreSQL", "err", err.Error())
			return 1
		}
	} else if slices.Contains(d.o.policies, "dlq") {
		d.dlq = "chaos-dlq-" + suffix
	}
	if d.o.window > 0 || d.o.duplicates() {
		d.late = "chaos-late-" + suffix
	}
	if d.o.counter() == "join" {
		d.joinTable = "chaos-table-" + suffix
	}
	if err := d.createTopics(); err != nil {
		d.log.Error("creating topics", "err", err.Error())
		return 1
	}
	tableDone, tableWritten, err := d.startTable()
	if err != nil {
		d.log.Error("the join's table", "err", err.Error())
		return 1
	}
	stop, err := d.setUpServices()
	if err != nil {
		d.log.Error("setting up", "err", err.Error())
		return 1
	}
	defer stop()
	d.logStart()

	for range d.o.instances {
		d.startNew()
	}
	produced := make(chan error, 1)
	go func() { produced <- d.produce() }()

	d.applyFaults()
	if err := <-produced; err != nil {
		d.log.Error("producing input", "err", err.Error())
		return 1
	}
	close(tableDone)
	if err := <-tableWritten; err != nil {
		d.log.Error("the join's table", "err", err.Error())
		return 1
	}
	d.log.Info("input written; waiting for the group to catch up")
	caughtUp := d.waitCaughtUp()
	d.stopAll()
	return d.report(caughtUp)
}

// setUpServices starts what the instances call besides the brokers: the
// Schema Registry with -value-format avro, and the http transform's
// service with http in the chain. stop ends them.
func (d *driver) setUpServices() (stop func(), err error) {
	stop = func() {}
	if d.o.valueFormat == "avro" {
		if stop, err = d.setUpSchemas(); err != nil {
			return nil, fmt.Errorf("Schema Registry: %w", err)
		}
	}
	if slices.Contains(d.o.transforms, "http") {
		if d.svc, err = startHTTPService(); err != nil {
			stop()
			return nil, err
		}
		stopSchemas := stop
		stop = func() { d.svc.stop(); stopSchemas() }
	}
	return stop, nil
}

// logStart logs the drill's settings as it starts.
func (d *driver) logStart() {
	d.log.Info("chaos starting", "brokers", strings.Join(d.brokers, ","), "group", d.group, "input", d.in, "output", d.out,
		"dlq", d.dlq, "sink", d.o.sink, "table", d.table, "dead_letter_table", d.deadTable,
		"instances", d.o.instances, "records", d.o.records, "iterations", d.o.iterations, "faults", strings.Join(d.o.faults, ","),
		"transforms", strings.Join(d.o.transforms, ","), "policies", strings.Join(d.o.policies, ","),
		"poison_every", d.o.poisonEvery, "poison_classes", classList(d.o.poisonClasses), "value_format", d.o.valueFormat,
		"schema_registry", d.registryURL, "state_dir", d.o.stateDir, "join_table", d.joinTable, "seed", d.o.seed, "logs", d.o.logDir)
}

// applyFaults applies -iterations faults, one every -pause, cycling
// through -faults (abort is no fault of its own: the instances' abort
// rate).
func (d *driver) applyFaults() {
	faults := slices.DeleteFunc(slices.Clone(d.o.faults), func(f string) bool { return f == "abort" })
	for i := 0; i < d.o.iterations && len(faults) > 0; i++ {
		time.Sleep(d.o.pause)
		f := faults[i%len(faults)]
		d.log.Info("fault", "iteration", i+1, "fault", f)
		d.apply(f)
		d.applied[f]++
	}
}
