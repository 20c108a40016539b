package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// options are the drill's flags, checked and resolved.
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
	wasmModule     string        // PROCESSOR_WASM_MODULE when wasm is in transforms: a counter by key
	policies       []string      // PROCESSOR_ON_ERROR per instance, in turn
	guarantee      string        // PROCESSOR_GUARANTEE
	sink           string        // PROCESSOR_SINK: kafka or postgres
	pgURL          string        // PROCESSOR_POSTGRES_URL with -sink postgres
	pgScript       string        // restarts PostgreSQL for pgrestart
	poisonEvery    int           // every poisonEvery-th input is a marked one; 0: none
	poisonClasses  []check.Class // the classes marked inputs are drawn from
	valueFormat    string        // raw or avro: the input values' format
	registryURL    string        // with avro: the registry; empty: one in process
	ordering       string        // PROCESSOR_ORDERING; empty: the processor's default
	stateDir       string        // with aggregate: each instance's PROCESSOR_STATE_DIR is under it
	window         time.Duration // with aggregate: EMIT=close windows of this length (grace the same), 0: a running count
	keys           string        // the input's keys: text, binary or orders (keys.go)
	customers      int           // with -keys orders: how many customers the orders are drawn from
	dupEvery       int           // with dedupe: every dupEvery-th input re-sends a recent one (dupes.go); 0: none
	env            envList       // more settings for every instance, NAME=value
	joinType       string        // with join: PROCESSOR_JOIN_TYPE, left or inner
	joinMode       string        // with join: PROCESSOR_JOIN_MODE, co_partitioned or global
	tableInterval  time.Duration // with join: the time between the table writer's transactions
	tableAbort     int           // with join: every tableAbort-th table transaction aborts; 0: none
}

// stateful reports whether the chain has a stateful stage, aggregate,
// the wasm counter, dedupe or join: the drill's stateful mode (see the
// package comment).
func (o options) stateful() bool { return o.counter() != "" }

// counter returns the chain's stateful stage, aggregate or wasm (the
// count example plugin, or a module that counts as it does), or dedupe
// (by the inputs' unique seq, so that every input passes once), or join
// (with the run's table, join.go), or "".
func (o options) counter() string {
	for _, t := range o.transforms {
		if slices.Contains(statefulTransforms, t) {
			return t
		}
	}
	return ""
}

// statefulTransforms are the drill's stateful stages.
var statefulTransforms = []string{"aggregate", "wasm", "dedupe", "join"}

// knownTransforms are the transforms the drill can run: each keeps every
// input record as exactly one output, as eoscheck's one-to-one audit
// needs; aggregate and wasm (a count by record key, the stateful mode)
// only last; join (left: every input once, with its row or null) last
// too; http calls the drill's own service (httpsvc.go).
var knownTransforms = []string{"identity", "jq", "http", "aggregate", "wasm", "dedupe", "join"}

// knownPolicies are the values of PROCESSOR_ON_ERROR.
var knownPolicies = []string{"fail", "dlq", "skip"}

// knownFaults are the faults -faults takes; pgrestart, pgslow and
// pgfreeze need -sink postgres, wipe the aggregate transform, httpdown
// the http transform.
var knownFaults = []string{"kill", "term", "stop", "scale", "broker", "pgrestart", "pgslow", "pgfreeze", "wipe", "httpdown", "abort"}

// The default faults, of a drill into Kafka, of one into PostgreSQL and
// of a stateful one (aggregate in the chain).
const (
	defaultFaults         = "kill,term,stop,scale,broker,abort"
	defaultPostgresFaults = "kill,term,stop,scale,broker,pgrestart,pgslow,pgfreeze,abort"
	defaultStatefulFaults = "kill,term,stop,scale,wipe,broker,abort"
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

// listFlags are the flags that take a list, as given, and which flags were
// given at all: their defaults depend on one another.
type listFlags struct {
	faults, transforms, policies, poisonClasses string
	set                                         map[string]bool
}

// parseOptions parses and checks the command line; a usage error exits 2.
func parseOptions() options {
	var o options
	var f listFlags
	defineFlags(&o, &f)
	flag.Parse()
	f.set = map[string]bool{}
	flag.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	o.resolveSink(&f)
	o.resolveChain(f)
	o.resolveState(&f)
	o.resolveJoin(&f)
	o.resolveFormat()
	o.resolveKeys()
	o.resolvePolicies(&f)
	o.resolveRest()
	return o
}

// defineFlags declares the flags into o and f.
func defineFlags(o *options, f *listFlags) {
	flag.StringVar(&o.bin, "bin", "bin", "directory with the processor, devbroker and eoscheck binaries")
	flag.StringVar(&o.brokers, "brokers", "", "seed brokers of an existing cluster (instead of -embedded)")
	flag.BoolVar(&o.embedded, "embedded", false, "run a devbroker (kfake) process and restart it cleanly as the broker fault")
	flag.BoolVar(&o.cluster, "cluster", false, "the brokers are the local three-node Apache Kafka cluster: the broker fault SIGKILLs and restarts its nodes")
	flag.StringVar(&o.clusterScript, "cluster-script", "integration/kafka/kafka.sh", "script that kills and starts cluster nodes")
	flag.IntVar(&o.instances, "instances", 3, "processor instances in the group")
	flag.IntVar(&o.records, "records", 100_000, "input records to write")
	flag.IntVar(&o.rate, "rate", 4000, "input records per second")
	flag.IntVar(&o.iterations, "iterations", 20, "faults to apply, cycling through -faults")
	flag.StringVar(&f.faults, "faults", defaultFaults, "faults to apply, comma-separated: kill, term, stop, scale, broker, pgrestart (-sink postgres), wipe (aggregate in -transforms: SIGKILL an instance, delete its state directory, restart it), httpdown (http in -transforms: the drill's HTTP service answers 503 for -pause, at least 1s; added to the default faults with http), abort (default with -sink postgres: "+defaultPostgresFaults+"; with aggregate: "+defaultStatefulFaults+")")
	flag.DurationVar(&o.pause, "pause", 2*time.Second, "time between faults")
	flag.DurationVar(&o.sessionTimeout, "session-timeout", 6*time.Second, "processors' PROCESSOR_SESSION_TIMEOUT")
	flag.DurationVar(&o.txnTimeout, "transaction-timeout", 5*time.Second, "processors' PROCESSOR_TRANSACTION_TIMEOUT")
	flag.DurationVar(&o.termBacklog, "term-backlog", time.Second, "the term fault first freezes the instance this long (SIGSTOP), so that the SIGTERM lands while it works through the backlog (0: SIGTERM at once)")
	flag.Float64Var(&o.abortRate, "abort-rate", 0.05, "fraction of transactions aborted on purpose when faults include abort")
	flag.DurationVar(&o.settle, "settle", 3*time.Minute, "how long the group may take to catch up at the end")
	flag.StringVar(&o.logDir, "logs", "", "directory for processor logs (default: a new temporary directory)")
	flag.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock)")
	flag.StringVar(&f.transforms, "transforms", "jq", "the processors' transform chain (PROCESSOR_TRANSFORMS): identity, jq, http, aggregate, wasm, dedupe and join, comma-separated; http calls the drill's own HTTP service once per record and attempt (GET /seq/<seq>, answered in about 1ms) and merges its answer into the output as svc, 8 requests a partition in flight with -ordering key, judged one to one like jq; aggregate (last) is the stateful mode: a count by record key in a state store per instance (-state-dir), judged by eoscheck -check aggregate; dedupe (last) dedupes by the inputs' unique seq, so every input must pass exactly once, judged one to one; join (last) joins every input with its key's row in a table topic the drill keeps writing (-join-type, -join-mode), judged by eoscheck -check join")
	flag.StringVar(&o.jqExpr, "jq-expr", ".seen = true", "the jq program (PROCESSOR_JQ_EXPR); it must turn each JSON input object into exactly one output")
	flag.StringVar(&f.policies, "policies", defaultPoisonPolicies, "error policies (PROCESSOR_ON_ERROR), one per instance, taken in turn by instance number (default with -poison-every 0: "+defaultPolicies+"); fail does not go with the notjson poison class, which a fail instance exits on by design: with fail in -policies the default classes leave notjson out")
	flag.IntVar(&o.poisonEvery, "poison-every", 500, "every Nth input is a marked hard one (key poison-<class>-<seq>, judged by eoscheck -poison), the classes of -poison-classes in rounds of each once, in an order drawn by the seed; 0: none, every input an ordinary JSON object")
	flag.StringVar(&f.poisonClasses, "poison-classes", "", "the classes of the marked inputs, comma-separated: notjson (not JSON: jq fails it, a dead letter or skipped; needs jq in -transforms and no fail policy), nearlimit (JSON of 1,000,000 to 1,048,000 bytes: an ordinary output), jsonb (-sink postgres: JSON that PostgreSQL's jsonb refuses: a row with value NULL and the bytes in value_bytes); default: every class the sink, chain and policies can meet")
	flag.StringVar(&o.ordering, "ordering", "", "the processors' PROCESSOR_ORDERING: partition or key (default: not set, the processor's default, partition); identity and jq are not ordered, so either shares each partition's records among the workers as without it; with http, key lets a partition's requests overlap (8 in flight), each key's in order; aggregate is, so with it key deals each partition's records to the workers by key")
	flag.StringVar(&o.guarantee, "guarantee", "exactly_once", "the processors' PROCESSOR_GUARANTEE: exactly_once, or at_least_once (eoscheck then counts inputs written twice, expected after a crash, and still fails on any lost)")
	flag.StringVar(&o.sink, "sink", "kafka", "the processors' PROCESSOR_SINK: kafka (an output topic) or postgres (tables in -postgres-url)")
	flag.StringVar(&o.pgURL, "postgres-url", "", "with -sink postgres: the database the processors write to (PROCESSOR_POSTGRES_URL) and eoscheck reads")
	flag.StringVar(&o.valueFormat, "value-format", "raw", "the input values' format: raw (JSON objects) or avro (the same objects in the Schema Registry wire format, their schema changed halfway through the input; the processors get PROCESSOR_VALUE_FORMAT=avro and encode outputs with the schema of <output>-value; needs -sink kafka)")
	flag.StringVar(&o.registryURL, "schema-registry", "", "with -value-format avro: the Schema Registry's URL, given to the processors as PROCESSOR_SCHEMA_REGISTRY_URL (default: one the drill runs in its own process on loopback)")
	flag.StringVar(&o.wasmModule, "wasm-module", "", "with wasm in -transforms: the WebAssembly counter (bin/plugins/count.wasm, the count example: a count by record key in its store counts, like aggregate's)")
	flag.StringVar(&o.stateDir, "state-dir", "", "with aggregate in -transforms: the directory under which instance N keeps its PROCESSOR_STATE_DIR, instance-N, across its restarts (default: state in the log directory)")
	flag.DurationVar(&o.window, "window", 0, "with aggregate in -transforms: a windowed count with EMIT=close, WINDOW and GRACE this long and a late topic, judged by eoscheck -check windows (exactly one final row per key and window, each its inputs that were not late) instead of -check aggregate; with -keys orders counted per customer behind the repartition hop (eoscheck -group-by); 0: a running count by key")
	flag.StringVar(&o.keys, "keys", keysText, "the input's keys: text (k0 ... k999), binary (the bytes of Java's LongSerializer and IntegerSerializer, 1,000 keys, most not UTF-8) or orders (an order id per input, o<seq>, and a customer in the value, which the stateful chain counts by: PROCESSOR_AGGREGATE_BY="+groupField+", judged by eoscheck -group-by "+groupField+"; needs aggregate last in -transforms)")
	flag.IntVar(&o.customers, "customers", 8, "with -keys orders: the customers c0 ... cN-1 the orders are drawn from, in turn, so that every customer has orders in every input partition")
	flag.IntVar(&o.dupEvery, "dup-every", 10, "with dedupe in -transforms: every Nth input re-sends a recent input's key and value (the same seq), half of them stamped 10m back, beyond the drill's dedupe GRACE of 1m: the dedupe must filter the others and write those to a late topic, judged by eoscheck -check dedupe; 0: every input unique, judged one to one")
	flag.StringVar(&o.joinType, "join-type", "left", "with join in -transforms: PROCESSOR_JOIN_TYPE, left (every input has an output, its row or null) or inner (an input without a row is filtered; no poison inputs then), judged by eoscheck -check join")
	flag.StringVar(&o.joinMode, "join-mode", "co_partitioned", "with join in -transforms: PROCESSOR_JOIN_MODE, co_partitioned (the table has the input's six partitions) or global (three)")
	flag.DurationVar(&o.tableInterval, "table-interval", 200*time.Millisecond, "with join in -transforms: the time between the table writer's transactions (eight rows each, one in six a tombstone) while the input is written")
	flag.IntVar(&o.tableAbort, "table-abort", 4, "with join in -transforms: every Nth table transaction is aborted (its rows must never be joined); 0: none")
	flag.Var(&o.env, "env", "a setting given to every instance, PROCESSOR_NAME=value, after the drill's own (repeatable), e.g. -env PROCESSOR_AGGREGATE_PARTITIONED_BY_KEY=false")
	flag.StringVar(&o.pgScript, "postgres-script", "integration/postgres/pg.sh", "with -sink postgres: the script pgrestart runs as 'restart fast' and 'restart immediate'; it must control the server of -postgres-url")
}

// resolveSink checks -sink and what goes with it, and resolves -faults
// (whose default depends on the sink).
func (o *options) resolveSink(f *listFlags) {
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
		if !f.set["faults"] {
			f.faults = defaultPostgresFaults
		}
	default:
		usage("unknown -sink %q (kafka or postgres)", o.sink)
	}
	o.faults = strings.Split(f.faults, ",")
	for _, fault := range o.faults {
		if !slices.Contains(knownFaults, fault) {
			usage("unknown fault %q in -faults (known: %s)", fault, strings.Join(knownFaults, ", "))
		}
		if strings.HasPrefix(fault, "pg") && o.sink != "postgres" {
			usage("the fault %s needs -sink postgres", fault)
		}
	}
	if slices.Contains(o.faults, "pgrestart") {
		if err := checkScript(o.pgScript, o.pgURL); err != nil {
			usage("-postgres-script: %v", err)
		}
	}
}

// resolveChain checks -transforms, -jq-expr and -guarantee.
func (o *options) resolveChain(f listFlags) {
	o.transforms = strings.Split(f.transforms, ",")
	for i, t := range o.transforms {
		if !slices.Contains(knownTransforms, t) {
			usage("unknown transform %q in -transforms (known: %s)", t, strings.Join(knownTransforms, ", "))
		}
		if slices.Contains(o.transforms[:i], t) {
			usage("transform %q appears twice in -transforms", t)
		}
	}
	stages := 0
	for _, t := range o.transforms {
		if slices.Contains(statefulTransforms, t) {
			stages++
		}
	}
	if c := o.counter(); c != "" && (slices.Index(o.transforms, c) != len(o.transforms)-1 || stages > 1) {
		// eoscheck's count check reads the counter's own outputs.
		usage("%s must be the last transform in -transforms, and the only stateful one", c)
	}
	if slices.Contains(o.transforms, "wasm") {
		if _, err := os.Stat(o.wasmModule); err != nil {
			usage("wasm in -transforms needs -wasm-module, the counter (bin/plugins/count.wasm): %v", err)
		}
	}
	if slices.Contains(o.transforms, "jq") && strings.TrimSpace(o.jqExpr) == "" {
		usage("-jq-expr is empty")
	}
	if http := slices.Contains(o.transforms, "http"); !http && slices.Contains(o.faults, "httpdown") {
		usage("the fault httpdown needs http in -transforms")
	} else if http && !f.set["faults"] {
		o.faults = append(o.faults, "httpdown")
	}
	if o.guarantee != "exactly_once" && o.guarantee != "at_least_once" {
		usage("unknown -guarantee %q (exactly_once or at_least_once)", o.guarantee)
	}
}

// resolveState checks what goes with the stateful mode (aggregate in the
// chain): exactly once into Kafka, as a stateful chain demands; the wipe
// fault and -state-dir need it. Its default faults add wipe.
func (o *options) resolveState(f *listFlags) {
	if o.window < 0 || (o.window > 0 && o.counter() != "aggregate") {
		usage("-window needs aggregate in -transforms and a positive duration")
	}
	if o.dupEvery < 0 || (f.set["dup-every"] && o.dupEvery > 0 && o.counter() != "dedupe") {
		usage("-dup-every needs dedupe in -transforms and a count not negative")
	}
	if !o.stateful() {
		if slices.Contains(o.faults, "wipe") {
			usage("the fault wipe needs aggregate, wasm, dedupe or join in -transforms (a chain with state)")
		}
		if o.stateDir != "" {
			usage("-state-dir needs aggregate, wasm, dedupe or join in -transforms")
		}
		return
	}
	switch {
	case o.guarantee != "exactly_once":
		usage("%s runs exactly once only (the processor refuses a stateful chain at -guarantee %s)", o.counter(), o.guarantee)
	case o.sink != "kafka":
		usage("%s needs -sink kafka (the processor refuses a stateful chain into a database)", o.counter())
	case o.valueFormat != "raw":
		usage("%s needs -value-format raw (its outputs, counts in JSON, fit no output schema of the drill's)", o.counter())
	}
	if !f.set["faults"] {
		o.faults = strings.Split(defaultStatefulFaults, ",")
	}
}

// resolveFormat checks -value-format and -schema-registry against the
// sink and the chain.
func (o *options) resolveFormat() {
	switch o.valueFormat {
	case "raw":
		if o.registryURL != "" {
			usage("-schema-registry needs -value-format avro")
		}
	case "avro":
		if o.sink != "kafka" {
			usage("-value-format avro needs -sink kafka (rows take the chain's JSON)")
		}
		if slices.Contains(o.transforms, "http") {
			usage("-value-format avro: the output schema has no field for the http transform's svc; use -value-format raw")
		}
		if slices.Contains(o.transforms, "jq") && o.jqExpr != avroJQExpr {
			usage("-value-format avro: the output schema fits -jq-expr %q only (the input's fields and seen), not %q", avroJQExpr, o.jqExpr)
		}
		if o.registryURL != "" && !strings.HasPrefix(o.registryURL, "http://") && !strings.HasPrefix(o.registryURL, "https://") {
			usage("-schema-registry %q: want an http or https URL", o.registryURL)
		}
	default:
		usage("unknown -value-format %q (raw or avro)", o.valueFormat)
	}
}

// resolvePolicies checks -poison-every and resolves -policies and
// -poison-classes, whose defaults depend on it and on each other.
func (o *options) resolvePolicies(f *listFlags) {
	if o.poisonEvery < 0 {
		usage("-poison-every %d must be at least 0", o.poisonEvery)
	}
	if o.poisonEvery == 0 && !f.set["policies"] {
		f.policies = defaultPolicies
	}
	o.policies = strings.Split(f.policies, ",")
	for _, p := range o.policies {
		if !slices.Contains(knownPolicies, p) {
			usage("unknown policy %q in -policies (known: %s)", p, strings.Join(knownPolicies, ", "))
		}
	}
	if o.poisonEvery > 0 {
		o.poisonClasses = resolveClasses(f.poisonClasses, f.set["poison-classes"], *o)
	} else if f.set["poison-classes"] {
		usage("-poison-classes needs -poison-every above 0")
	}
}

// resolveRest checks the timings, the brokers and the counts, and fills in
// the seed and the log directory.
func (o *options) resolveRest() {
	if o.termBacklog < 0 || o.termBacklog >= o.sessionTimeout || o.termBacklog >= o.txnTimeout {
		usage("-term-backlog %s must be at least 0 and below -session-timeout and -transaction-timeout", o.termBacklog)
	}
	if o.embedded == (o.brokers != "") {
		usage("give either -embedded or -brokers")
	}
	if o.ordering != "" && o.ordering != "partition" && o.ordering != "key" {
		usage("-ordering must be partition or key, not %q", o.ordering)
	}
	if o.instances < 1 || o.records < 1 || o.rate < 1 {
		usage("-instances, -records and -rate must be at least 1")
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	if o.logDir == "" {
		dir, err := os.MkdirTemp("", "chaos-logs")
		if err != nil {
			fatal(err)
		}
		o.logDir = dir
	} else if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		fatal(err)
	}
	if o.stateful() && o.stateDir == "" {
		o.stateDir = filepath.Join(o.logDir, "state")
	}
}

// resolveClasses returns the poison classes of -poison-classes (list;
// explicit: the flag was given), or by default every class the drill's
// sink, chain and policies can meet: notjson needs jq in the chain
// (identity and aggregate, which counts by the record key, pass any value) and no fail instance (which exits
// on it by design); jsonb needs the postgres sink (Kafka takes any bytes).
func resolveClasses(list string, explicit bool, o options) []check.Class {
	notJSONWhy := ""
	switch {
	case !slices.Contains(o.transforms, "jq"):
		notJSONWhy = "needs jq in -transforms (identity and aggregate, a count by record key, pass any value)"
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
