// Command chaos is the processor's fault drill. It runs several processor
// processes (the built binary) in one consumer group while a producer keeps
// writing keyed input, applies faults on a schedule, waits for the group to
// catch up, and then audits the output with eoscheck. It exits 1 if eoscheck
// finds any anomaly or a processor exited when it should not have.
//
// Faults, applied in turn, one per iteration:
//
//	kill    SIGKILL an instance, restart it under the same transactional
//	        and static member IDs (its recovery time is measured)
//	term    SIGSTOP an instance for -term-backlog so input piles up,
//	        SIGCONT, and SIGTERM it while it works through the backlog (it
//	        must fail no record and exit 0); restart it
//	stop    SIGSTOP an instance for longer than the session timeout, then
//	        SIGCONT: the zombie must be fenced and write nothing visible
//	scale   start one more instance; the next time, stop it again
//	broker  restart a broker: the embedded devbroker cleanly (SIGTERM and
//	        start from its data directory), or SIGKILL and restart a node of
//	        the local three-node Apache Kafka cluster (-cluster)
//	pgrestart  with -sink postgres: restart PostgreSQL through
//	        -postgres-script, "restart fast" and "restart immediate" (a
//	        crash: in-flight transactions are lost, the server recovers
//	        from its WAL) in turn
//
// With "abort" in -faults, every instance also aborts a fraction of its
// transactions on purpose (PROCESSOR_TEST_ABORT_RATE).
//
// The instances run a transform chain (-transforms, PROCESSOR_TRANSFORMS;
// by default jq with a program that keeps every record, -jq-expr) and an
// error policy each (-policies, PROCESSOR_ON_ERROR), taken in turn by
// instance number, so one group mixes dlq and skip (and fail, see below).
// The ordinary input values are JSON objects carrying a sequence number,
// so they never fail a transform: every dead letter of one (dlq instances
// write to a dead-letter topic the drill creates, and eoscheck reads it
// with -dlq) and every dropped one (skip instances; eoscheck's lost) is a
// good record the processor gave up on, and a fail instance exits 1 on
// such a record.
//
// Among them, every -poison-every'th input (500 by default; 0: none) is a
// marked hard one, its key poison-<class>-<seq>, its class taken from
// -poison-classes (by default every class the sink, chain and policies can
// meet) in rounds that hold each class once in an order drawn by the seed,
// and so are each class's variants; eoscheck -poison judges each by its
// class:
//
//	notjson    not JSON (plain text, a cut-off object, bytes that are not
//	           UTF-8): the jq transform fails it, a record failure for the
//	           policy; exactly one dead letter, or nothing where a skip
//	           instance dropped it (eoscheck -poison-skip: skipped by
//	           policy, not lost). Needs jq in the chain.
//	nearlimit  a JSON object of 1,000,000 to 1,048,000 bytes (a pad of
//	           random letters): after jq and the lineage headers its output
//	           still fits Kafka's default max.message.bytes (1048588), so
//	           it must come out as one ordinary output or row
//	jsonb      with -sink postgres: JSON that PostgreSQL's jsonb refuses
//	           but that passes the chain (an integer of 140,000 digits, an
//	           escaped NUL; without jq also a lone surrogate escape): one
//	           row with value NULL and the bytes in value_bytes
//
// A fail instance exits on a notjson input by design and meets it again
// after every restart, so with poison on the default policies are dlq and
// skip; -policies with fail leaves notjson out of the default classes (and
// -poison-classes notjson with fail is a usage error). The drill's topics
// keep the broker's default max.message.bytes; its producer's batches go
// up to 1 MiB so that the nearlimit inputs fit.
//
// With -sink postgres the instances write into PostgreSQL instead of an
// output topic (PROCESSOR_SINK=postgres): rows into a table of the run's
// own (chaos_<id>), dead letters into another (chaos_dl_<id>), and the
// consumed offsets into processor_offsets under the run's group, all in
// one database transaction per batch. The default faults then include
// pgrestart, the drill waits until the offsets stored in the database
// reach the input's end, and eoscheck audits the tables
// (-postgres-url). The tables are kept for inspection.
//
//	chaos -embedded -records 100000 -iterations 20
//	chaos -embedded -transforms identity -policies fail   # poison: nearlimit only
//	chaos -embedded -poison-every 0 -policies fail,dlq,skip   # no poison
//	chaos -cluster -brokers 127.0.0.1:19192,127.0.0.1:19292,127.0.0.1:19392
//	chaos -embedded -sink postgres -postgres-url "$(bash integration/postgres/pg.sh url)"
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

type options struct {
	bin            string
	brokers        string
	embedded       bool
	cluster        bool
	clusterScript  string
	instances      int
	records        int
	rate           int
	iterations     int
	faults         []string
	pause          time.Duration
	sessionTimeout time.Duration
	txnTimeout     time.Duration
	abortRate      float64
	termBacklog    time.Duration
	settle         time.Duration
	logDir         string
	seed           uint64
	transforms     []string      // PROCESSOR_TRANSFORMS entries
	jqExpr         string        // PROCESSOR_JQ_EXPR when jq is in transforms
	policies       []string      // PROCESSOR_ON_ERROR per instance, in turn
	guarantee      string        // PROCESSOR_GUARANTEE
	sink           string        // PROCESSOR_SINK: kafka or postgres
	pgURL          string        // PROCESSOR_POSTGRES_URL with -sink postgres
	pgScript       string        // restarts PostgreSQL for pgrestart
	poisonEvery    int           // every poisonEvery-th input is a marked one; 0: none
	poisonClasses  []check.Class // the classes marked inputs are drawn from
}

// knownTransforms are the transforms the drill can run: both keep every
// input record as exactly one output, as eoscheck's one-to-one audit needs.
var knownTransforms = []string{"identity", "jq"}

// knownPolicies are the values of PROCESSOR_ON_ERROR.
var knownPolicies = []string{"fail", "dlq", "skip"}

// knownFaults are the faults -faults takes; pgrestart needs -sink postgres.
var knownFaults = []string{"kill", "term", "stop", "scale", "broker", "pgrestart", "abort"}

// The default faults, of a drill into Kafka and of one into PostgreSQL.
const (
	defaultFaults         = "kill,term,stop,scale,broker,abort"
	defaultPostgresFaults = "kill,term,stop,scale,broker,pgrestart,abort"
)

// The default policies, without poison inputs and with them: a fail
// instance exits on a record that fails the chain, by design, so a notjson
// poison input would stop it at every restart.
const (
	defaultPolicies       = "fail,dlq,skip"
	defaultPoisonPolicies = "dlq,skip"
)

// pgModes are the shutdown modes pgrestart uses in turn: fast (clients
// disconnected, in-flight transactions rolled back, a checkpoint) and
// immediate (a crash: recovery from the WAL at the next start).
var pgModes = []string{"fast", "immediate"}

func main() {
	var o options
	var faults, transforms, policies, poisonClasses string
	flag.StringVar(&o.bin, "bin", "bin", "directory with the processor, devbroker and eoscheck binaries")
	flag.StringVar(&o.brokers, "brokers", "", "seed brokers of an existing cluster (instead of -embedded)")
	flag.BoolVar(&o.embedded, "embedded", false, "run a devbroker (kfake) process and restart it cleanly as the broker fault")
	flag.BoolVar(&o.cluster, "cluster", false, "the brokers are the local three-node Apache Kafka cluster: the broker fault SIGKILLs and restarts its nodes")
	flag.StringVar(&o.clusterScript, "cluster-script", "integration/kafka/kafka.sh", "script that kills and starts cluster nodes")
	flag.IntVar(&o.instances, "instances", 3, "processor instances in the group")
	flag.IntVar(&o.records, "records", 100_000, "input records to write")
	flag.IntVar(&o.rate, "rate", 4000, "input records per second")
	flag.IntVar(&o.iterations, "iterations", 20, "faults to apply, cycling through -faults")
	flag.StringVar(&faults, "faults", defaultFaults, "faults to apply, comma-separated: kill, term, stop, scale, broker, pgrestart (-sink postgres), abort (default with -sink postgres: "+defaultPostgresFaults+")")
	flag.DurationVar(&o.pause, "pause", 2*time.Second, "time between faults")
	flag.DurationVar(&o.sessionTimeout, "session-timeout", 6*time.Second, "processors' PROCESSOR_SESSION_TIMEOUT")
	flag.DurationVar(&o.txnTimeout, "transaction-timeout", 5*time.Second, "processors' PROCESSOR_TRANSACTION_TIMEOUT")
	flag.DurationVar(&o.termBacklog, "term-backlog", time.Second, "the term fault first freezes the instance this long (SIGSTOP), so that the SIGTERM lands while it works through the backlog (0: SIGTERM at once)")
	flag.Float64Var(&o.abortRate, "abort-rate", 0.05, "fraction of transactions aborted on purpose when faults include abort")
	flag.DurationVar(&o.settle, "settle", 3*time.Minute, "how long the group may take to catch up at the end")
	flag.StringVar(&o.logDir, "logs", "", "directory for processor logs (default: a new temporary directory)")
	flag.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock)")
	flag.StringVar(&transforms, "transforms", "jq", "the processors' transform chain (PROCESSOR_TRANSFORMS): identity and jq, comma-separated")
	flag.StringVar(&o.jqExpr, "jq-expr", ".seen = true", "the jq program (PROCESSOR_JQ_EXPR); it must turn each JSON input object into exactly one output")
	flag.StringVar(&policies, "policies", defaultPoisonPolicies, "error policies (PROCESSOR_ON_ERROR), one per instance, taken in turn by instance number (default with -poison-every 0: "+defaultPolicies+"); fail does not go with the notjson poison class, which a fail instance exits on by design: with fail in -policies the default classes leave notjson out")
	flag.IntVar(&o.poisonEvery, "poison-every", 500, "every Nth input is a marked hard one (key poison-<class>-<seq>, judged by eoscheck -poison), the classes of -poison-classes in rounds of each once, in an order drawn by the seed; 0: none, every input an ordinary JSON object")
	flag.StringVar(&poisonClasses, "poison-classes", "", "the classes of the marked inputs, comma-separated: notjson (not JSON: jq fails it, a dead letter or skipped; needs jq in -transforms and no fail policy), nearlimit (JSON of 1,000,000 to 1,048,000 bytes: an ordinary output), jsonb (-sink postgres: JSON that PostgreSQL's jsonb refuses: a row with value NULL and the bytes in value_bytes); default: every class the sink, chain and policies can meet")
	flag.StringVar(&o.guarantee, "guarantee", "exactly_once", "the processors' PROCESSOR_GUARANTEE: exactly_once, or at_least_once (eoscheck then counts inputs written twice, expected after a crash, and still fails on any lost)")
	flag.StringVar(&o.sink, "sink", "kafka", "the processors' PROCESSOR_SINK: kafka (an output topic) or postgres (tables in -postgres-url)")
	flag.StringVar(&o.pgURL, "postgres-url", "", "with -sink postgres: the database the processors write to (PROCESSOR_POSTGRES_URL) and eoscheck reads")
	flag.StringVar(&o.pgScript, "postgres-script", "integration/postgres/pg.sh", "with -sink postgres: the script pgrestart runs as 'restart fast' and 'restart immediate'; it must control the server of -postgres-url")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch o.sink {
	case "kafka":
		if o.pgURL != "" {
			usage("-postgres-url needs -sink postgres")
		}
	case "postgres":
		if o.pgURL == "" {
			usage("-sink postgres needs -postgres-url")
		}
		if o.guarantee != "exactly_once" {
			usage("-sink postgres runs exactly once only (-guarantee %s)", o.guarantee)
		}
		if !set["faults"] {
			faults = defaultPostgresFaults
		}
	default:
		usage("unknown -sink %q (kafka or postgres)", o.sink)
	}
	o.faults = strings.Split(faults, ",")
	for _, f := range o.faults {
		if !slices.Contains(knownFaults, f) {
			usage("unknown fault %q in -faults (known: %s)", f, strings.Join(knownFaults, ", "))
		}
		if f == "pgrestart" && o.sink != "postgres" {
			usage("the fault pgrestart needs -sink postgres")
		}
	}
	if slices.Contains(o.faults, "pgrestart") {
		if err := checkScript(o.pgScript, o.pgURL); err != nil {
			usage("-postgres-script: %v", err)
		}
	}
	o.transforms = strings.Split(transforms, ",")
	for i, t := range o.transforms {
		if !slices.Contains(knownTransforms, t) {
			usage("unknown transform %q in -transforms (known: %s)", t, strings.Join(knownTransforms, ", "))
		}
		if slices.Contains(o.transforms[:i], t) {
			usage("transform %q appears twice in -transforms", t)
		}
	}
	if slices.Contains(o.transforms, "jq") && strings.TrimSpace(o.jqExpr) == "" {
		usage("-jq-expr is empty")
	}
	if o.guarantee != "exactly_once" && o.guarantee != "at_least_once" {
		usage("unknown -guarantee %q (exactly_once or at_least_once)", o.guarantee)
	}
	if o.poisonEvery < 0 {
		usage("-poison-every %d must be at least 0", o.poisonEvery)
	}
	if o.poisonEvery == 0 && !set["policies"] {
		policies = defaultPolicies
	}
	o.policies = strings.Split(policies, ",")
	for _, p := range o.policies {
		if !slices.Contains(knownPolicies, p) {
			usage("unknown policy %q in -policies (known: %s)", p, strings.Join(knownPolicies, ", "))
		}
	}
	if o.poisonEvery > 0 {
		o.poisonClasses = resolveClasses(poisonClasses, set["poison-classes"], o)
	} else if set["poison-classes"] {
		usage("-poison-classes needs -poison-every above 0")
	}
	if o.termBacklog < 0 || o.termBacklog >= o.sessionTimeout || o.termBacklog >= o.txnTimeout {
		usage("-term-backlog %s must be at least 0 and below -session-timeout and -transaction-timeout", o.termBacklog)
	}
	if o.embedded == (o.brokers != "") {
		usage("give either -embedded or -brokers")
	}
	if o.instances < 1 || o.records < 1 || o.rate < 1 {
		usage("-instances, -records and -rate must be at least 1")
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	if o.logDir == "" {
		d, err := os.MkdirTemp("", "chaos-logs")
		if err != nil {
			fatal(err)
		}
		o.logDir = d
	} else if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		fatal(err)
	}
	d := &driver{o: o, log: slog.New(slog.NewTextHandler(os.Stderr, nil)), rng: rand.New(rand.NewPCG(o.seed, 1)),
		insts: map[int]*instance{}, poisonWritten: map[string]int{}}
	os.Exit(d.run())
}

// resolveClasses returns the poison classes of -poison-classes (list;
// explicit: the flag was given), or by default every class the drill's
// sink, chain and policies can meet: notjson needs jq in the chain (the
// identity transform passes any value) and no fail instance (which exits
// on it by design); jsonb needs the postgres sink (Kafka takes any bytes).
func resolveClasses(list string, explicit bool, o options) []check.Class {
	notJSONWhy := ""
	switch {
	case !slices.Contains(o.transforms, "jq"):
		notJSONWhy = "needs jq in -transforms (the identity transform passes any value)"
	case slices.Contains(o.policies, "fail"):
		notJSONWhy = "does not go with the fail policy: a fail instance exits on it by design and meets it again at every restart; use -policies dlq,skip, or leave notjson out of -poison-classes"
	}
	jsonbWhy := ""
	if o.sink != "postgres" {
		jsonbWhy = "needs -sink postgres (Kafka takes any bytes)"
	}
	if !explicit {
		var out []check.Class
		for _, c := range check.Classes {
			if c == check.NotJSON && notJSONWhy != "" || c == check.JSONBRefused && jsonbWhy != "" {
				continue
			}
			out = append(out, c)
		}
		return out
	}
	var out []check.Class
	for _, name := range strings.Split(list, ",") {
		c := check.Class(name)
		switch {
		case !slices.Contains(check.Classes, c):
			usage("unknown class %q in -poison-classes (known: notjson, nearlimit, jsonb)", name)
		case slices.Contains(out, c):
			usage("class %q appears twice in -poison-classes", name)
		case c == check.NotJSON && notJSONWhy != "":
			usage("the poison class notjson %s", notJSONWhy)
		case c == check.JSONBRefused && jsonbWhy != "":
			usage("the poison class jsonb %s", jsonbWhy)
		}
		out = append(out, c)
	}
	return out
}

func usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...)
	os.Exit(2)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "chaos:", err)
	os.Exit(1)
}

type driver struct {
	o   options
	log *slog.Logger
	rng *rand.Rand

	brokers    []string
	broker     *exec.Cmd // the devbroker, with -embedded
	brokerAddr string
	brokerDir  string

	group, in, out string
	dlq            string // the dead-letter topic, when a policy is dlq

	// With -sink postgres: the run's tables, the database they are in,
	// how often pgrestart ran each shutdown mode, how long the script
	// took to restart the server, and how long after each restart the
	// group's stored offsets moved again.
	table, deadTable string
	pool             *pgxpool.Pool
	pgRestarts       map[string]int
	pgDowntimes      []time.Duration
	pgRecoveries     []time.Duration

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
}

// instance is one processor process; a restart replaces cmd.
type instance struct {
	id          int
	cmd         *exec.Cmd
	done        chan struct{}
	exitErr     error
	expectExit  atomic.Bool
	started     atomic.Bool  // it logged "processor starting": its signal handling is up
	firstCommit atomic.Int64 // unix nanos of its first progress line with a commit
}

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
	if err := d.createTopics(); err != nil {
		d.log.Error("creating topics", "err", err.Error())
		return 1
	}
	d.log.Info("chaos starting", "brokers", strings.Join(d.brokers, ","), "group", d.group, "input", d.in, "output", d.out,
		"dlq", d.dlq, "sink", d.o.sink, "table", d.table, "dead_letter_table", d.deadTable,
		"instances", d.o.instances, "records", d.o.records, "iterations", d.o.iterations, "faults", strings.Join(d.o.faults, ","),
		"transforms", strings.Join(d.o.transforms, ","), "policies", strings.Join(d.o.policies, ","),
		"poison_every", d.o.poisonEvery, "poison_classes", classList(d.o.poisonClasses), "seed", d.o.seed, "logs", d.o.logDir)

	for range d.o.instances {
		d.startNew()
	}
	produced := make(chan error, 1)
	go func() { produced <- d.produce() }()

	faults := slices.DeleteFunc(slices.Clone(d.o.faults), func(f string) bool { return f == "abort" })
	for i := 0; i < d.o.iterations && len(faults) > 0; i++ {
		time.Sleep(d.o.pause)
		f := faults[i%len(faults)]
		d.log.Info("fault", "iteration", i+1, "fault", f)
		d.apply(f)
		d.applied[f]++
	}
	if err := <-produced; err != nil {
		d.log.Error("producing input", "err", err.Error())
		return 1
	}
	d.log.Info("input written; waiting for the group to catch up")
	caughtUp := d.waitCaughtUp()
	d.stopAll()
	return d.report(caughtUp)
}

// --- processors ---

func (d *driver) startNew() int {
	d.mu.Lock()
	d.nextID++
	id := d.nextID
	d.mu.Unlock()
	d.start(id)
	return id
}

func (d *driver) start(id int) {
	inst := &instance{id: id, done: make(chan struct{})}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"PROCESSOR_BROKERS=" + strings.Join(d.brokers, ","),
		"PROCESSOR_GROUP=" + d.group,
		"PROCESSOR_INPUT_TOPICS=" + d.in,
		fmt.Sprintf("PROCESSOR_TRANSACTIONAL_ID=%s-%d", d.group, id),
		fmt.Sprintf("PROCESSOR_INSTANCE_ID=%s-%d", d.group, id),
		"PROCESSOR_SESSION_TIMEOUT=" + d.o.sessionTimeout.String(),
		"PROCESSOR_TRANSACTION_TIMEOUT=" + d.o.txnTimeout.String(),
		"PROCESSOR_COMMIT_INTERVAL=200ms",
		// Two workers share each poll's records (the default on 2 cores,
		// set so that the drill runs them on any machine): the backlogs
		// the faults leave behind make polls of hundreds of records.
		"PROCESSOR_WORKERS=2",
		"PROCESSOR_HTTP_ADDR=127.0.0.1:0",
		"PROCESSOR_PROGRESS_INTERVAL=250ms",
		"PROCESSOR_LOG_FORMAT=json",
	}
	if d.o.sink == "postgres" {
		env = append(env, "PROCESSOR_SINK=postgres", "PROCESSOR_POSTGRES_URL="+d.o.pgURL,
			"PROCESSOR_POSTGRES_TABLE="+d.table, "PROCESSOR_POSTGRES_DEAD_LETTER_TABLE="+d.deadTable)
	} else {
		env = append(env, "PROCESSOR_OUTPUT_TOPIC="+d.out)
	}
	if slices.Contains(d.o.faults, "abort") {
		env = append(env, fmt.Sprintf("PROCESSOR_TEST_ABORT_RATE=%g", d.o.abortRate))
	}
	env = append(env, "PROCESSOR_TRANSFORMS="+strings.Join(d.o.transforms, ","), "PROCESSOR_GUARANTEE="+d.o.guarantee)
	if slices.Contains(d.o.transforms, "jq") {
		env = append(env, "PROCESSOR_JQ_EXPR="+d.o.jqExpr)
	}
	policy := d.policy(id)
	env = append(env, "PROCESSOR_ON_ERROR="+policy)
	if policy == "dlq" && d.dlq != "" {
		env = append(env, "PROCESSOR_DLQ_TOPIC="+d.dlq)
	}
	cmd := exec.Command(filepath.Join(d.o.bin, "processor"))
	cmd.Env = env
	logf, err := os.OpenFile(filepath.Join(d.o.logDir, fmt.Sprintf("processor-%d.log", id)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fatal(err)
	}
	// The log file is the process's stderr itself: nothing of ours sits
	// between a processor and its log, so a slow reader can never block it.
	cmd.Stderr = logf
	inst.cmd = cmd
	from, err := logf.Seek(0, io.SeekEnd) // where this run's lines begin
	if err != nil {
		fatal(err)
	}
	if err := cmd.Start(); err != nil {
		fatal(fmt.Errorf("starting processor %d: %w", id, err))
	}
	go inst.watchLog(logf.Name(), from)
	go func() {
		inst.exitErr = cmd.Wait()
		logf.Close()
		close(inst.done)
		if !inst.expectExit.Load() {
			d.mu.Lock()
			d.unexpected = append(d.unexpected, fmt.Sprintf("processor %d exited on its own: %v (log %s)", id, inst.exitErr,
				filepath.Join(d.o.logDir, fmt.Sprintf("processor-%d.log", id))))
			d.mu.Unlock()
			d.log.Error("processor exited on its own; restarting it", "instance", id, "err", fmt.Sprint(inst.exitErr))
			d.start(id)
		}
	}()
	d.mu.Lock()
	d.insts[id] = inst
	d.mu.Unlock()
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
			case <-inst.done:
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

func (d *driver) pick() *instance {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]int, 0, len(d.insts))
	for id := range d.insts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return d.insts[ids[d.rng.IntN(len(ids))]]
}

// stop ends inst with sig and waits; SIGTERM must end in exit 0.
func (d *driver) stop(inst *instance, sig syscall.Signal) {
	inst.expectExit.Store(true)
	// A process signalled before Go's runtime installed its handlers dies
	// of the signal; wait for the first log line of a fresh one.
	for deadline := time.Now().Add(10 * time.Second); !inst.started.Load() && time.Now().Before(deadline); {
		select {
		case <-inst.done:
			deadline = time.Time{} // already gone
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = inst.cmd.Process.Signal(sig)
	select {
	case <-inst.done:
	case <-time.After(d.o.sessionTimeout + 30*time.Second):
		d.mu.Lock()
		d.unexpected = append(d.unexpected, fmt.Sprintf("processor %d did not exit within %s of %s", inst.id, d.o.sessionTimeout+30*time.Second, sig))
		d.mu.Unlock()
		_ = inst.cmd.Process.Kill()
		<-inst.done
	}
	if sig == syscall.SIGTERM && inst.exitErr != nil {
		d.mu.Lock()
		d.unexpected = append(d.unexpected, fmt.Sprintf("processor %d exited with %v after SIGTERM, want 0", inst.id, inst.exitErr))
		d.mu.Unlock()
	}
}

func (d *driver) apply(fault string) {
	switch fault {
	case "kill":
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
	case "term":
		inst := d.pick()
		if d.o.termBacklog > 0 {
			// Let input pile up, then signal the instance while it
			// works through it: the SIGTERM lands mid-batch.
			_ = inst.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(d.o.termBacklog)
			_ = inst.cmd.Process.Signal(syscall.SIGCONT)
			time.Sleep(time.Duration(d.rng.IntN(20)) * time.Millisecond)
		}
		d.stop(inst, syscall.SIGTERM)
		d.start(inst.id)
	case "stop":
		inst := d.pick()
		_ = inst.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(d.o.sessionTimeout + 2*time.Second)
		_ = inst.cmd.Process.Signal(syscall.SIGCONT)
	case "scale":
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
	case "broker":
		d.restartBroker()
	case "pgrestart":
		d.restartPostgres()
	}
}

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

// --- brokers ---

func (d *driver) startBroker() error {
	if d.brokerAddr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		d.brokerAddr = ln.Addr().String()
		ln.Close()
		d.brokerDir = filepath.Join(d.o.logDir, "devbroker-data")
		d.brokers = []string{d.brokerAddr}
	}
	cmd := exec.Command(filepath.Join(d.o.bin, "devbroker"), "-addr", d.brokerAddr, "-dir", d.brokerDir)
	logf, err := os.OpenFile(filepath.Join(d.o.logDir, "devbroker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	d.broker = cmd
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", d.brokerAddr); err == nil {
			c.Close()
			return nil
		}
	}
	return errors.New("devbroker did not listen within 30s")
}

func (d *driver) stopBroker() {
	if d.broker == nil {
		return
	}
	_ = d.broker.Process.Signal(syscall.SIGTERM)
	_ = d.broker.Wait()
	d.broker = nil
}

func (d *driver) restartBroker() {
	if d.o.embedded {
		d.stopBroker()
		time.Sleep(time.Second)
		if err := d.startBroker(); err != nil {
			fatal(fmt.Errorf("restarting the devbroker: %w", err))
		}
		return
	}
	if !d.o.cluster {
		d.log.Warn("the broker fault needs -embedded or -cluster; skipped")
		return
	}
	node := strconv.Itoa(1 + d.applied["broker"]%3)
	for _, args := range [][]string{{"kill", node}, nil, {"start", node}} {
		if args == nil {
			time.Sleep(3 * time.Second)
			continue
		}
		if out, err := exec.Command("bash", append([]string{d.o.clusterScript}, args...)...).CombinedOutput(); err != nil {
			fatal(fmt.Errorf("%s %s: %v\n%s", d.o.clusterScript, strings.Join(args, " "), err, out))
		}
	}
}

// --- input and progress ---

func (d *driver) admin() (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func (d *driver) createTopics() error {
	adm, closeFn, err := d.admin()
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics := []string{d.in}
	if d.out != "" {
		topics = append(topics, d.out)
	}
	if d.dlq != "" {
		topics = append(topics, d.dlq)
	}
	resp, err := adm.CreateTopics(ctx, 6, -1, nil, topics...)
	if err != nil {
		return err
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			return fmt.Errorf("%s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// inputBatchMaxBytes is the drill producer's record batch limit: 1 MiB,
// above the largest nearlimit input with its batch (1,048,000 bytes of
// value and about 100 of key and framing) and below the 1048588 bytes that
// kfake and Apache Kafka accept by default (max.message.bytes), which the
// drill's topics keep. franz-go's default, 1,000,012, would refuse them.
const inputBatchMaxBytes = 1 << 20

// produce writes the keyed input at the configured rate; the idempotent
// producer rides out broker restarts without duplicating input. Each
// ordinary value is a JSON object with the record's key and sequence
// number, e.g. {"key":"k7","seq":1007}, which any one-to-one jq program
// accepts; with -poison-every N every Nth input is a marked one instead
// (poisonInput).
func (d *driver) produce() error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.DefaultProduceTopic(d.in), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(inputBatchMaxBytes))
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed atomic.Pointer[error]
	// Its own random source: d.rng serves the faults, concurrently.
	rng := rand.New(rand.NewPCG(d.o.seed, 2))
	var round []check.Class                // the poison classes still to come in this round
	variants := map[check.Class][]string{} // per class, the variants still to come in its round
	interval := time.Second / time.Duration(d.o.rate)
	next := time.Now()
	for i := range d.o.records {
		next = next.Add(interval)
		if w := time.Until(next); w > time.Millisecond {
			time.Sleep(w)
		}
		key := "k" + strconv.Itoa(i%1000)
		value, err := json.Marshal(inputValue{Key: key, Seq: i})
		if err != nil {
			return err
		}
		var class check.Class
		var variant string
		if d.o.poisonEvery > 0 && i%d.o.poisonEvery == d.o.poisonEvery-1 {
			if len(round) == 0 {
				// Each round holds every class once, in an order of
				// the seed's: even a short drill meets them all.
				round = slices.Clone(d.o.poisonClasses)
				rng.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
			}
			class, round = round[0], round[1:]
			key = check.PoisonKey(class, i)
			if len(variants[class]) == 0 {
				// The variants of a class come in rounds too.
				vs := poisonVariants[class]
				if class == check.JSONBRefused && slices.Contains(d.o.transforms, "jq") {
					vs = vs[:2] // jq turns a lone surrogate into U+FFFD
				}
				vs = slices.Clone(vs)
				rng.Shuffle(len(vs), func(a, b int) { vs[a], vs[b] = vs[b], vs[a] })
				variants[class] = vs
			}
			variant, variants[class] = variants[class][0], variants[class][1:]
			value = poisonInput(rng, variant, key, i)
		}
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(key), Value: value},
			func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if class != check.Ordinary {
					d.mu.Lock()
					d.poisonWritten[string(class)]++
					d.poisonWritten[string(class)+"/"+variant]++
					d.mu.Unlock()
				}
			})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if e := failed.Load(); e != nil {
		return *e
	}
	return nil
}

// inputValue is the JSON value of an input record.
type inputValue struct {
	Key string `json:"key"`
	Seq int    `json:"seq"`
}

// The sizes of the marked inputs: nearlimit values are drawn between
// nearLimitMin and nearLimitMax bytes, so that the output (jq's
// `.seen = true` adds 12 bytes, the lineage headers about 100, the batch
// framing about 100) still fits Kafka's default max.message.bytes,
// 1048588; bignumDigits is the length of the jsonb class's integer, past
// the 131,072 digits before the point that PostgreSQL's numeric holds
// (gojq keeps such an integer as it is).
const (
	nearLimitMin = 1_000_000
	nearLimitMax = 1_048_000
	bignumDigits = 140_000
)

// poisonVariants are the variants of each class, which come in rounds of
// each once in an order drawn by the seed; surrogate (a lone UTF-16
// surrogate escape, which jsonb refuses) only without jq, which turns it
// into U+FFFD.
var poisonVariants = map[check.Class][]string{
	check.NotJSON:      {"text", "truncated", "binary"},
	check.NearLimit:    {"pad"},
	check.JSONBRefused: {"bignum", "nul", "surrogate"},
}

// poisonInput returns the value of variant v of the marked input seq (key
// its key), by class:
//
//   - notjson: plain text, a JSON object cut short, or bytes that are not
//     UTF-8; the jq transform fails each.
//   - nearlimit: {"key":…,"seq":…,"pad":"…"} of nearLimitMin to
//     nearLimitMax bytes, the pad random letters and digits (so that
//     compression does not hide the size from the broker).
//   - jsonb: {"key":…,"seq":…,"poison":…} with an integer of bignumDigits
//     digits, a string with an escaped NUL, or (without jq) a lone
//     surrogate escape; eoscheck finds the poison member verbatim in the
//     row's value_bytes.
func poisonInput(rng *rand.Rand, v string, key string, seq int) []byte {
	head := fmt.Sprintf(`{"key":%q,"seq":%d,`, key, seq)
	switch v {
	case "text":
		return []byte("not JSON: " + key)
	case "truncated":
		return []byte(head + `"cut":`)
	case "binary":
		return append([]byte{0xff, 0xfe, 0x00, 0x80}, key...)
	case "pad":
		size := nearLimitMin + rng.IntN(nearLimitMax-nearLimitMin+1)
		b := make([]byte, 0, size)
		b = append(b, head+`"pad":"`...)
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		for len(b) < size-2 {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		return append(b, `"}`...)
	case "bignum":
		b := make([]byte, 0, len(head)+bignumDigits+20)
		b = append(b, head+`"`+check.PoisonField+`":`...)
		b = append(b, byte('1'+rng.IntN(9)))
		for range bignumDigits - 1 {
			b = append(b, byte('0'+rng.IntN(10)))
		}
		return append(b, '}')
	case "nul":
		return []byte(head + `"` + check.PoisonField + `":"nul \u0000 byte"}`)
	default: // surrogate
		return []byte(head + `"` + check.PoisonField + `":"lone \ud800 surrogate"}`)
	}
}

// waitCaughtUp waits until the group has committed the whole input: in
// Kafka, or with -sink postgres in the database, whose stored offsets are
// the truth there (the group's in Kafka are a copy).
func (d *driver) waitCaughtUp() bool {
	adm, closeFn, err := d.admin()
	if err != nil {
		return false
	}
	defer closeFn()
	for deadline := time.Now().Add(d.o.settle); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, d.in)
		var at func(p int32) (int64, bool)
		var err2 error
		if d.pool != nil {
			var stored map[int32]int64
			stored, err2 = d.storedOffsets(ctx)
			at = func(p int32) (int64, bool) { o, ok := stored[p]; return o, ok }
		} else {
			var committed kadm.OffsetResponses
			committed, err2 = adm.FetchOffsets(ctx, d.group)
			at = func(p int32) (int64, bool) { c, ok := committed.Lookup(d.in, p); return c.At, ok }
		}
		cancel()
		if err1 != nil || err2 != nil {
			continue
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := at(o.Partition); !ok || c < o.Offset {
				done = false
			}
		})
		if done {
			return true
		}
	}
	return false
}

// --- report ---

func (d *driver) report(caughtUp bool) int {
	fmt.Printf("\nchaos run: %d records, %d instances (+scale), seed %d, logs in %s\n", d.o.records, d.o.instances, d.o.seed, d.o.logDir)
	fmt.Printf("%-10s %s\n", "fault", "applied")
	for _, f := range []string{"kill", "term", "stop", "scale", "broker", "pgrestart"} {
		n := d.applied[f]
		if n == 0 {
			continue
		}
		modes := ""
		if f == "pgrestart" {
			modes = fmt.Sprintf(" (%d fast, %d immediate)", d.pgRestarts["fast"], d.pgRestarts["immediate"])
		}
		fmt.Printf("%-10s %d%s\n", f, n, modes)
	}
	if slices.Contains(d.o.faults, "abort") {
		fmt.Printf("%-10s rate %g of transactions\n", "abort", d.o.abortRate)
	}
	chain := strings.Join(d.o.transforms, ",")
	if slices.Contains(d.o.transforms, "jq") {
		chain += fmt.Sprintf(" (jq: %s)", d.o.jqExpr)
	}
	fmt.Printf("transforms %s\n", chain)
	d.mu.Lock()
	last := d.nextID
	d.mu.Unlock()
	var byPolicy []string
	for _, p := range knownPolicies {
		var ids []string
		for id := 1; id <= last; id++ {
			if d.policy(id) == p {
				ids = append(ids, strconv.Itoa(id))
			}
		}
		switch len(ids) {
		case 0:
		case 1:
			byPolicy = append(byPolicy, fmt.Sprintf("%s (instance %s)", p, ids[0]))
		default:
			byPolicy = append(byPolicy, fmt.Sprintf("%s (instances %s)", p, strings.Join(ids, ", ")))
		}
	}
	fmt.Printf("policies   %s\n", strings.Join(byPolicy, ", "))
	if d.o.poisonEvery > 0 {
		fmt.Printf("poison     every %d inputs one of %s: %s\n", d.o.poisonEvery, classList(d.o.poisonClasses), d.poisonSummary())
	} else {
		fmt.Printf("poison     none (-poison-every 0)\n")
	}
	if d.table != "" {
		fmt.Printf("sink       postgres: table %s, dead letters %s, offsets processor_offsets (group %s)\n", d.table, d.deadTable, d.group)
	}
	d.mu.Lock()
	recoveries, pgDown, pgRec := slices.Clone(d.recoveries), slices.Clone(d.pgDowntimes), slices.Clone(d.pgRecoveries)
	d.mu.Unlock()
	if len(recoveries) > 0 {
		fmt.Printf("recovery after SIGKILL (restart to first commit): %s restarts\n", spread(recoveries))
	}
	if len(pgDown) > 0 {
		fmt.Printf("PostgreSQL restart (stop and start, the script's time): %s restarts\n", spread(pgDown))
	}
	if len(pgRec) > 0 {
		fmt.Printf("commits after a PostgreSQL restart (server up to an offset stored): %s restarts\n", spread(pgRec))
	}
	failed := false
	if !caughtUp {
		fmt.Printf("the group did not catch up within %s\n", d.o.settle)
		failed = true
	}
	for _, u := range d.unexpected {
		fmt.Println("unexpected:", u)
		failed = true
	}
	fmt.Println()
	args := []string{"-brokers", strings.Join(d.brokers, ","), "-input", d.in, "-group", d.group}
	if d.table != "" {
		// Every instance writes dead letters to the run's own table,
		// so it is read whatever the policies: any row in it is a good
		// record given up on.
		args = append(args, "-postgres-url", d.o.pgURL, "-table", d.table, "-dead-letter-table", d.deadTable)
	} else {
		args = append(args, "-output", d.out, "-transaction-timeout", d.o.txnTimeout.String())
	}
	if d.dlq != "" {
		args = append(args, "-dlq", d.dlq)
	}
	if d.o.guarantee == "at_least_once" {
		args = append(args, "-at-least-once")
	}
	if d.o.poisonEvery > 0 {
		args = append(args, "-poison")
		if slices.Contains(d.o.policies, "skip") {
			args = append(args, "-poison-skip")
		}
	}
	cmd := exec.Command(filepath.Join(d.o.bin, "eoscheck"), args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		failed = true
	}
	if failed {
		fmt.Println("chaos: FAILED")
		return 1
	}
	fmt.Println("chaos: every anomaly count is zero")
	return 0
}

// classList renders classes comma-separated, "none" when empty.
func classList(classes []check.Class) string {
	if len(classes) == 0 {
		return "none"
	}
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = string(c)
	}
	return strings.Join(names, ",")
}

// poisonSummary renders the marked inputs written per class and variant,
// e.g. "notjson 4 (text 2, binary 2), nearlimit 3 (pad 3)".
func (d *driver) poisonSummary() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var parts []string
	for _, c := range d.o.poisonClasses {
		var vs []string
		for _, v := range poisonVariants[c] {
			if n := d.poisonWritten[string(c)+"/"+v]; n > 0 {
				vs = append(vs, fmt.Sprintf("%s %d", v, n))
			}
		}
		part := fmt.Sprintf("%s %d", c, d.poisonWritten[string(c)])
		if len(vs) > 0 {
			part += " (" + strings.Join(vs, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// spread renders the min, median and max of ds and their number, e.g.
// "min 1s, median 2s, max 3s over 3".
func spread(ds []time.Duration) string {
	r := slices.Clone(ds)
	slices.Sort(r)
	return fmt.Sprintf("min %s, median %s, max %s over %d",
		r[0].Round(10*time.Millisecond), r[len(r)/2].Round(10*time.Millisecond), r[len(r)-1].Round(10*time.Millisecond), len(r))
}

// --- PostgreSQL ---

// checkScript checks that script exists and controls the server of
// pgURL: its "url" command must name the same host and port, or pgrestart
// would restart a server the processors do not use.
func checkScript(script, pgURL string) error {
	if _, err := os.Stat(script); err != nil {
		return err
	}
	want, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return errors.New("-postgres-url is not a PostgreSQL URL")
	}
	out, err := exec.Command("bash", script, "url").Output()
	if err != nil {
		return fmt.Errorf("%s url: %w", script, err)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return fmt.Errorf("%s url printed nothing", script)
	}
	got, err := pgx.ParseConfig(lines[len(lines)-1])
	if err != nil {
		return fmt.Errorf("%s url printed no PostgreSQL URL", script)
	}
	if got.Host != want.Host || got.Port != want.Port {
		return fmt.Errorf("%s controls the server at %s:%d, not the one of -postgres-url (%s:%d); set PROCESSOR_PG_PORT and PROCESSOR_PG_DIR as for that server",
			script, got.Host, got.Port, want.Host, want.Port)
	}
	return nil
}

// openDatabase connects to -postgres-url and checks that it answers.
func (d *driver) openDatabase() (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(d.o.pgURL)
	if err != nil {
		return nil, errors.New("-postgres-url is not a PostgreSQL URL") // the parser's message may quote the password
	}
	cfg.MaxConns = 2
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// checkFresh fails when the run's tables or its group's stored offsets
// are already in the database: the names come from the seed, the tables
// are kept after a run, and a drill repeated with the same seed would
// audit the earlier run's rows together with its own.
func (d *driver) checkFresh() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tables, hasOffsets, offsets bool
	err := d.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL OR to_regclass($2) IS NOT NULL, to_regclass('processor_offsets') IS NOT NULL`,
		d.table, d.deadTable).Scan(&tables, &hasOffsets)
	if err == nil && hasOffsets {
		err = d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM processor_offsets WHERE "group" = $1)`, d.group).Scan(&offsets)
	}
	if err != nil {
		return fmt.Errorf("looking for tables and offsets left from an earlier run: %w", err)
	}
	if tables || offsets {
		return fmt.Errorf("the tables %s and %s or the stored offsets of group %s are left from an earlier run with seed %d: use another -seed, or drop them", d.table, d.deadTable, d.group, d.o.seed)
	}
	return nil
}

// storedOffsets returns the group's next offsets of the input partitions
// stored in processor_offsets, the truth of a run into PostgreSQL.
func (d *driver) storedOffsets(ctx context.Context) (map[int32]int64, error) {
	rows, err := d.pool.Query(ctx, `SELECT "partition", next_offset FROM processor_offsets WHERE "group" = $1 AND topic = $2`, d.group, d.in)
	if err != nil {
		return nil, fmt.Errorf("reading processor_offsets: %w", err)
	}
	out := map[int32]int64{}
	var p int32
	var next int64
	_, err = pgx.ForEachRow(rows, []any{&p, &next}, func() error {
		out[p] = next
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading processor_offsets: %w", err)
	}
	return out, nil
}

// restartPostgres is the pgrestart fault: the script stops the server
// with the next shutdown mode in turn and starts it again. Then it
// measures, in the background, how long the group takes to store an
// offset again (nothing is measured once the input is all consumed).
func (d *driver) restartPostgres() {
	mode := pgModes[d.applied["pgrestart"]%len(pgModes)]
	d.log.Info("restarting PostgreSQL", "mode", mode)
	began := time.Now()
	out, err := exec.Command("bash", d.o.pgScript, "restart", mode).CombinedOutput()
	up := time.Now()
	if err != nil {
		d.mu.Lock()
		d.unexpected = append(d.unexpected, fmt.Sprintf("%s restart %s: %v: %s", d.o.pgScript, mode, err, strings.TrimSpace(string(out))))
		d.mu.Unlock()
		d.log.Error("restarting PostgreSQL failed; starting it", "mode", mode, "err", err.Error())
		if out, err := exec.Command("bash", d.o.pgScript, "start").CombinedOutput(); err != nil {
			fatal(fmt.Errorf("%s start: %v\n%s", d.o.pgScript, err, out))
		}
		return
	}
	d.mu.Lock()
	d.pgRestarts[mode]++
	d.pgDowntimes = append(d.pgDowntimes, up.Sub(began))
	d.mu.Unlock()
	go func() {
		for deadline := up.Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var moved bool
			err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM processor_offsets WHERE "group" = $1 AND updated_at > $2)`, d.group, up).Scan(&moved)
			cancel()
			if err == nil && moved {
				d.mu.Lock()
				d.pgRecoveries = append(d.pgRecoveries, time.Since(up))
				d.mu.Unlock()
				return
			}
		}
	}()
}
