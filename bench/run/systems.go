package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/sample"
)

// jqExpr is the CPU-bound chain of the jq rows (sample.JQChain).
const jqExpr = sample.JQChain

// system is one column of contestants: how to start it for a run.
type system struct {
	key    string
	label  string
	format string // the input's and output's: "" for JSON, avroFormat for Avro
	// needs are processor settings that the processor must know (listed by
	// `processor config -markdown`), or the row is "not available": setting an
	// unknown variable would measure something else.
	needs []string
	cmd   func(e *environment, b *broker, s *runSpec, extra []string) (launch.Command, error)
	// onePartition: the system drains a copy of the input in one
	// partition (input.single), where only parallelism inside a partition
	// helps.
	onePartition bool
	// stores are the state stores of a stateful chain: each run gets a
	// fresh PROCESSOR_STATE_DIR in a temporary directory, removed after
	// the run, and the stores' changelogs (<group>-<store>-changelog) are
	// deleted with the run's other topics.
	stores []string
	// window: the chain emits one final row per key and window of this
	// length when it closes (EMIT=close), not one output per input: the
	// outputs are not counted against the inputs, and the latency is from
	// a window's end (its final row is stamped end - 1 ms) to its row.
	window time.Duration
	// ownInput: the run drains a copy of the input pre-loaded for it
	// alone, and its latency phase writes to that copy instead of a
	// second input topic: a stateful chain takes exactly one input topic,
	// and the shared input must stay the same for every run.
	ownInput bool
	// table: the run reads the customers table (input.table), pre-loaded
	// once when such a row runs: keyed by customer like the orders, with
	// as many partitions, so that the orders and the table are
	// co-partitioned.
	table bool
	// topology is a Kafka Streams row's topology in bench/kstreams
	// (identity, count, sum, dedupe or join); "" for the other rows.
	topology string
	// pair is the Kafka Streams row that does the same work, which the
	// "vs Kafka Streams" column compares with; "" for the identity row
	// (kstreams).
	pair string
	// records, when set, is how many records the run's own input holds
	// (ownInput), instead of -records: a row that is slow by design
	// (a service per record) still fits the run.
	records int
	// keys, when set, is how many distinct customer keys the run's own
	// input cycles through (sample.Order), instead of customers.
	keys int
	// restore: a restore row (-restore). Its run has a recovery phase
	// whatever -crash says, after an update phase of updatesFor instead
	// of the latency phase, and the system is killed while those records
	// still flow; it runs once a round, at the first size and interval.
	restore bool
	// wipe: the restore row deletes the state directory before the
	// restart, so the store is rebuilt from its changelog's start.
	wipe bool
}

var systems = []system{
	{key: "copier", label: "bare franz-go GroupTransactSession copier", cmd: copierCmd},
	{key: "processor", label: "processor, exactly once (identity)", cmd: processorCmd(nil)},
	{key: "processor-alo", label: "processor, at least once (identity)",
		needs: []string{"PROCESSOR_GUARANTEE"}, cmd: processorCmd(func(in *launch.Instance) { in.Guarantee = "at_least_once" })},
	{key: "jq-1", label: "processor, jq chain, 1 worker",
		needs: []string{"PROCESSOR_WORKERS"}, cmd: processorCmd(jqChain(1))},
	{key: "jq-n", label: fmt.Sprintf("processor, jq chain, %d workers (all cores)", runtime.NumCPU()),
		needs: []string{"PROCESSOR_WORKERS"}, cmd: processorCmd(jqChain(runtime.NumCPU()))},
	{key: "jq-avro", label: fmt.Sprintf("processor, Avro in, jq chain, Avro out, %d workers (all cores)", runtime.NumCPU()),
		format: avroFormat, needs: []string{"PROCESSOR_WORKERS", "PROCESSOR_VALUE_FORMAT", "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE"}, cmd: avroJQCmd(runtime.NumCPU())},
	{key: "copier-p1", label: "bare franz-go GroupTransactSession copier, single-partition input", onePartition: true, cmd: copierCmd},
	{key: "processor-p1", label: "processor, exactly once (identity), single-partition input", onePartition: true, cmd: processorCmd(nil)},
	{key: "jq-1-p1", label: "processor, jq chain, 1 worker, single-partition input", onePartition: true,
		needs: []string{"PROCESSOR_WORKERS"}, cmd: processorCmd(jqChain(1))},
	{key: "jq-2-p1", label: "processor, jq chain, 2 workers, single-partition input", onePartition: true,
		needs: []string{"PROCESSOR_WORKERS"}, cmd: processorCmd(jqChain(2))},
	{key: "aggregate", label: fmt.Sprintf("processor, aggregate sum by customer, %d workers (stateful)", runtime.NumCPU()),
		stores: []string{"aggregate"}, ownInput: true, pair: "kstreams-sum",
		needs: []string{"PROCESSOR_WORKERS", "PROCESSOR_STATE_DIR", "PROCESSOR_AGGREGATE_FUNCTION", "PROCESSOR_AGGREGATE_FIELD", "PROCESSOR_AGGREGATE_BY"},
		cmd: statefulCmd("aggregate", map[string]string{
			"PROCESSOR_AGGREGATE_FUNCTION": "sum", "PROCESSOR_AGGREGATE_FIELD": ".amount_cents", "PROCESSOR_AGGREGATE_BY": ".customer"})},
	{key: "aggregate-count", label: fmt.Sprintf("processor, aggregate count by customer, %d workers (stateful)", runtime.NumCPU()),
		stores: []string{"aggregate"}, ownInput: true, pair: "kstreams-count",
		needs: []string{"PROCESSOR_WORKERS", "PROCESSOR_STATE_DIR", "PROCESSOR_AGGREGATE_FUNCTION", "PROCESSOR_AGGREGATE_BY"},
		cmd: statefulCmd("aggregate", map[string]string{
			"PROCESSOR_AGGREGATE_FUNCTION": "count", "PROCESSOR_AGGREGATE_BY": ".customer"})},
	{key: "window-close", label: fmt.Sprintf("processor, aggregate count by customer in 200ms windows, EMIT=close, %d workers (stateful)", runtime.NumCPU()),
		stores: []string{"aggregate"}, ownInput: true, window: 200 * time.Millisecond,
		needs: []string{"PROCESSOR_WORKERS", "PROCESSOR_STATE_DIR", "PROCESSOR_AGGREGATE_BY", "PROCESSOR_AGGREGATE_WINDOW", "PROCESSOR_AGGREGATE_EMIT"},
		cmd: statefulCmd("aggregate", map[string]string{
			"PROCESSOR_AGGREGATE_BY": ".customer", "PROCESSOR_AGGREGATE_WINDOW": "200ms", "PROCESSOR_AGGREGATE_EMIT": "close"})},
	{key: "dedupe", label: fmt.Sprintf("processor, dedupe by order id, %d workers (stateful, no duplicates)", runtime.NumCPU()),
		stores: []string{"dedupe"}, ownInput: true, pair: "kstreams-dedupe",
		needs: []string{"PROCESSOR_WORKERS", "PROCESSOR_STATE_DIR", "PROCESSOR_DEDUPE_BY"},
		cmd:   statefulCmd("dedupe", map[string]string{"PROCESSOR_DEDUPE_BY": ".order_id"})},
	{key: "join", label: fmt.Sprintf("processor, join with the customers table, co-partitioned, %d workers (stateful)", runtime.NumCPU()),
		ownInput: true, table: true, pair: "kstreams-join",
		needs: []string{"PROCESSOR_WORKERS", "PROCESSOR_STATE_DIR", "PROCESSOR_JOIN_TABLE", "PROCESSOR_JOIN_BY", "PROCESSOR_JOIN_INTO", "PROCESSOR_JOIN_MODE"},
		cmd:   joinCmd},
	httpRow(1), httpRow(8), httpRow(32),
	restoreRow("restore", false), restoreRow("restore-wiped", true),
	{key: "kstreams", label: "Kafka Streams 4.4.0, exactly_once_v2 (identity)", topology: "identity", cmd: kstreamsCmd},
	{key: "kstreams-count", label: ksLabel("count by customer (groupBy, repartition)"),
		topology: "count", stores: []string{"aggregate"}, ownInput: true, pair: "kstreams-count", cmd: kstreamsCmd},
	{key: "kstreams-sum", label: ksLabel("sum by customer (groupBy, repartition)"),
		topology: "sum", stores: []string{"aggregate"}, ownInput: true, pair: "kstreams-sum", cmd: kstreamsCmd},
	{key: "kstreams-dedupe", label: ksLabel("dedupe by order id (repartition, processor + store)"),
		topology: "dedupe", stores: []string{"dedupe"}, ownInput: true, pair: "kstreams-dedupe", cmd: kstreamsCmd},
	{key: "kstreams-join", label: ksLabel("join with the customers KTable, co-partitioned"),
		topology: "join", stores: []string{"customers"}, ownInput: true, table: true, pair: "kstreams-join", cmd: kstreamsCmd},
	restoreRow("kstreams-restore", false), restoreRow("kstreams-restore-wiped", true),
}

// ksLabel is the label of a stateful Kafka Streams row: RocksDB stores
// with changelogs, the record cache off, one stream thread per core.
func ksLabel(what string) string {
	return fmt.Sprintf("Kafka Streams 4.4.0, exactly_once_v2, %s, %d threads (RocksDB, stateful)", what, runtime.NumCPU())
}

// isKStreams reports whether the system k is a Kafka Streams row.
func isKStreams(k string) bool {
	s, ok := systemByKey(k)
	return ok && s.topology != ""
}

// versus is the key of the Kafka Streams row that s is compared with.
func (s system) versus() string {
	if s.pair != "" {
		return s.pair
	}
	return "kstreams"
}

func systemKeys() []string {
	var ks []string
	for _, s := range systems {
		ks = append(ks, s.key)
	}
	return ks
}

// baseSuffix marks a system run with the -baseline processor binary
// instead of this tree's: "aggregate@base" is the aggregate row of the
// baseline build, so a change is measured beside what it changed, in the
// same rounds on the same broker.
const baseSuffix = "@base"

// systemByKey returns the system k names: one of systems, or a processor
// system with baseSuffix run from the baseline binary (e.baseline).
func systemByKey(k string) (system, bool) {
	name, base := strings.CutSuffix(k, baseSuffix)
	for _, s := range systems {
		if s.key != name {
			continue
		}
		if !base {
			return s, true
		}
		if s.key == "copier" || s.key == "copier-p1" || s.topology != "" {
			return system{}, false // not a processor: no baseline build of it
		}
		own := s.cmd
		s.key, s.label = k, s.label+", baseline build"
		s.cmd = func(e *environment, b *broker, r *runSpec, extra []string) (launch.Command, error) {
			if e.baseline == "" {
				return launch.Command{}, fmt.Errorf("%s needs -baseline, the processor binary to compare with", k)
			}
			be := *e
			be.processor = e.baseline
			return own(&be, b, r, extra)
		}
		return s, true
	}
	return system{}, false
}

// availability says, before any run, which systems cannot be measured and
// why: a processor setting that this build does not know, or no Kafka
// Streams jar.
func availability(o options, e *environment) map[string]string {
	why := map[string]string{}
	ref, err := exec.Command(e.processor, "config", "-markdown").Output()
	var baseRef []byte
	var baseErr error
	if e.baseline != "" {
		baseRef, baseErr = exec.Command(e.baseline, "config", "-markdown").Output()
	}
	for _, k := range o.systems {
		s, _ := systemByKey(k)
		ref, err := ref, err
		if strings.HasSuffix(k, baseSuffix) {
			ref, err = baseRef, baseErr
			if e.baseline == "" {
				why[k] = "no -baseline binary given"
				continue
			}
		}
		for _, v := range s.needs {
			switch {
			case err != nil:
				why[k] = fmt.Sprintf("`processor config` failed (%v), so whether it knows %s is unknown", err, v)
			case !strings.Contains(string(ref), "`"+v+"`"):
				why[k] = fmt.Sprintf("this processor build does not know %s yet (not in `processor config`)", v)
			}
		}
		if isKStreams(k) && e.jar == "" {
			why[k] = e.jarWhy
		}
	}
	return why
}

// runSpec is one run: one system draining one input with one commit
// interval, in its own group, to its own output topic.
type runSpec struct {
	sys      system
	name     string
	group    string
	round    int
	interval time.Duration
	in       *input
	out      string // output topic
	live     string // second input topic, written to only in the latency phase
	log      string
	// stateDir is Kafka Streams' state directory, or a stateful row's
	// PROCESSOR_STATE_DIR; removed after the run.
	stateDir string
	// table is the customers table topic of a row with table set.
	table string
	// member is the static group member ID (the processor's
	// PROCESSOR_INSTANCE_ID, Kafka Streams' group.instance.id, the
	// copier's -instance-id) of a run with a recovery phase, so that the
	// restart gets the partitions back at once rather than after the
	// killed member's session timeout; "" otherwise.
	member string
}

func copierCmd(e *environment, b *broker, s *runSpec, _ []string) (launch.Command, error) {
	args := []string{"-brokers", strings.Join(b.addrs, ","), "-group", s.group,
		"-topics", s.in.topic + "," + s.live, "-out", s.out, "-txn-id", s.group + "-copier",
		"-commit-interval", s.interval.String()}
	if s.member != "" {
		args = append(args, "-instance-id", s.member)
	}
	return launch.Command{Path: e.copier, Args: args}, nil
}

// processorCmd runs bin/processor with its defaults, except for what a run
// must set (brokers, group, topics, transactional ID, commit interval, an
// ephemeral HTTP port) and the system's own settings (set), then extra.
// PROCESSOR_* variables of the caller's environment are not passed on.
func processorCmd(set func(*launch.Instance)) func(*environment, *broker, *runSpec, []string) (launch.Command, error) {
	return func(e *environment, b *broker, s *runSpec, extra []string) (launch.Command, error) {
		topics := []string{s.in.topic}
		if s.live != s.in.topic {
			topics = append(topics, s.live)
		}
		in := launch.Instance{
			Brokers:         b.addrs,
			Group:           s.group,
			InputTopics:     topics,
			OutputTopic:     s.out,
			TransactionalID: s.group + "-p",
			CommitInterval:  s.interval,
			InstanceID:      s.member,
			HTTPAddr:        "127.0.0.1:0",
			LogFormat:       "json",
			Extra:           extra,
		}
		if set != nil {
			set(&in)
		}
		return in.Command(e.processor, launch.Inherit), nil
	}
}

// jqChain sets the jq rows' chain at the given number of workers.
func jqChain(workers int) func(*launch.Instance) {
	return func(in *launch.Instance) {
		in.Transforms = []string{"jq"}
		in.Settings = map[string]string{"PROCESSOR_JQ_EXPR": jqExpr}
		in.Workers = workers
	}
}

// statefulCmd runs the one stateful transform name with its settings, at
// one worker per core (the processor's default, set explicitly as in the
// jq-n row), with the run's fresh state directory. The run's spec has one
// input topic (ownInput), which the latency phase writes to as well.
func statefulCmd(name string, settings map[string]string) func(*environment, *broker, *runSpec, []string) (launch.Command, error) {
	return func(e *environment, b *broker, s *runSpec, extra []string) (launch.Command, error) {
		if s.stateDir == "" {
			return launch.Command{}, fmt.Errorf("no state directory for the %s row", name)
		}
		return processorCmd(func(in *launch.Instance) {
			in.Transforms = []string{name}
			in.Settings = map[string]string{"PROCESSOR_STATE_DIR": s.stateDir}
			for k, v := range settings {
				in.Settings[k] = v
			}
			in.Workers = runtime.NumCPU()
		})(e, b, s, extra)
	}
}

// joinCmd runs the join transform: each order joined, by .customer, with
// the run's customers table (co-partitioned with the orders), the
// customer's row put in as .customer_row.
func joinCmd(e *environment, b *broker, s *runSpec, extra []string) (launch.Command, error) {
	if s.table == "" {
		return launch.Command{}, fmt.Errorf("no customers table for the %s row", s.sys.key)
	}
	return statefulCmd("join", map[string]string{
		"PROCESSOR_JOIN_TABLE": s.table, "PROCESSOR_JOIN_BY": ".customer",
		"PROCESSOR_JOIN_INTO": ".customer_row", "PROCESSOR_JOIN_MODE": "co_partitioned"})(e, b, s, extra)
}

// avroJQCmd is the jq chain at the given number of workers on Avro: the
// input decoded by its schema ids from the run's registry, the output
// encoded with benchOutSchema (registered at start under <output>-value).
func avroJQCmd(workers int) func(*environment, *broker, *runSpec, []string) (launch.Command, error) {
	return func(e *environment, b *broker, s *runSpec, extra []string) (launch.Command, error) {
		if e.registry == "" {
			return launch.Command{}, fmt.Errorf("no schema registry for the Avro rows")
		}
		return processorCmd(func(in *launch.Instance) {
			jqChain(workers)(in)
			in.Settings["PROCESSOR_VALUE_FORMAT"] = avroFormat
			in.Settings["PROCESSOR_SCHEMA_REGISTRY_URL"] = e.registry
			in.Settings["PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE"] = e.avroOut
		})(e, b, s, extra)
	}
}

// kstreamsCmd runs the Kafka Streams application with the JVM's
// defaults: the identity topology with its defaults (one stream thread),
// or a stateful one (the system's topology) at one stream thread per
// core, as the processor's stateful rows run one worker per core.
func kstreamsCmd(e *environment, b *broker, s *runSpec, _ []string) (launch.Command, error) {
	if err := os.MkdirAll(s.stateDir, 0o755); err != nil {
		return launch.Command{}, err
	}
	topics := s.in.topic
	if s.live != s.in.topic {
		topics += "," + s.live
	}
	args := []string{"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}
	if s.member != "" {
		args = append(args, "-Dbench.instance.id="+s.member) // static membership (BenchCopy)
	}
	args = append(args, "-jar", e.jar, strings.Join(b.addrs, ","), s.group, topics, s.out,
		strconv.FormatInt(s.interval.Milliseconds(), 10), s.stateDir)
	if t := s.sys.topology; t != "" && t != "identity" {
		args = append(args, t, strconv.Itoa(runtime.NumCPU()))
		if s.sys.table {
			if s.table == "" {
				return launch.Command{}, fmt.Errorf("no customers table for the %s row", s.sys.key)
			}
			args = append(args, s.table)
		}
	}
	return launch.Command{Path: e.java, Args: args}, nil
}
