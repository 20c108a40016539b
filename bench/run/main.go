// Command run is `make bench`: the side-by-side throughput benchmark. It
// drains the same pre-loaded input with a bare franz-go
// GroupTransactSession copier (bench/copier), the processor (exactly once,
// at least once, with a CPU-bound jq chain at one worker and at all cores,
// with that chain on Avro in and out, its schema registry an in-process
// srserver, and the stateful aggregate and dedupe transforms, each on a
// fresh state directory) and a Kafka Streams 4.4.0 application
// (bench/kstreams), each in its own fresh consumer group writing to its
// own output topic, in alternating rounds, and prints one Markdown table
// of the medians.
//
//	go run ./bench/run -mode quick           # make bench
//	go run ./bench/run -mode full            # make bench BENCH=full
//
// The broker is the project's Apache Kafka (integration/kafka/kafka.sh) when
// it answers on 127.0.0.1:19092, otherwise a kfake devbroker process that
// this command starts and stops; -broker and -brokers choose explicitly.
// docs/benchmarks.md describes the method and the columns.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/interrupt"
	"github.com/streamproc/processor/internal/sample"
)

// options are the command's flags.
type options struct {
	mode        string
	records     int
	rounds      int
	sizes       []int
	intervals   []time.Duration
	systems     []string
	partitions  int
	broker      string
	brokers     string
	liveRate    int
	liveFor     time.Duration
	out         string
	keep        bool
	noBuild     bool
	runTimeout  time.Duration
	settle      time.Duration
	processorEx []string // extra PROCESSOR_* settings for every processor run
	note        string
	baseline    string // a processor binary of another build, for the systems named <key>@base
	crash       bool   // after the latency phase, SIGKILL and restart each system (recoverPhase)
	restore     bool   // add the restore rows (restore.go) to the systems
}

// modes are the defaults of -mode; flags given explicitly win.
var modes = map[string]struct {
	records, rounds, liveRate int
	liveFor                   time.Duration
}{
	"quick": {records: 50_000, rounds: 2, liveRate: 1000, liveFor: time.Second},
	"full":  {records: 500_000, rounds: 5, liveRate: 2000, liveFor: 3 * time.Second},
}

func main() {
	var o options
	var sizes, intervals, systems string
	flag.StringVar(&o.mode, "mode", envOr("BENCH", "quick"), "quick or full: the defaults of -records, -rounds, -live-rate and -live-for ($BENCH)")
	flag.IntVar(&o.records, "records", 0, "input records per record size (default: quick 50000, full 500000)")
	flag.IntVar(&o.rounds, "rounds", 0, "alternating rounds; the table shows medians (default: quick 2, full 5)")
	flag.StringVar(&sizes, "sizes", "100,1024", "record sizes in bytes (JSON order events padded to the size)")
	flag.StringVar(&intervals, "intervals", "100ms,1s", "commit intervals")
	flag.StringVar(&systems, "systems", strings.Join(defaultSystems(), ","), "systems to run, in this order within a round")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of the input and output topics")
	flag.StringVar(&o.broker, "broker", "auto", "auto (Apache Kafka on 127.0.0.1:19092 if it answers, else kfake), kafka (kafka.sh up first) or kfake")
	flag.StringVar(&o.brokers, "brokers", "", "use these seed brokers instead (comma-separated); overrides -broker")
	flag.IntVar(&o.liveRate, "live-rate", 0, "records/s written after each drain to measure end-to-end latency (default: quick 1000, full 2000)")
	flag.DurationVar(&o.liveFor, "live-for", 0, "how long the latency phase writes (default: quick 1s, full 3s)")
	flag.StringVar(&o.out, "out", "bench/results/latest.md", "where the table and its conditions are written")
	flag.BoolVar(&o.keep, "keep", false, "keep the topics and groups this run created")
	flag.BoolVar(&o.noBuild, "no-build", false, "use the binaries and jar already built")
	flag.DurationVar(&o.runTimeout, "run-timeout", 0, "give up on a run that has not drained by then (default 2m + 1ms a record)")
	flag.DurationVar(&o.settle, "settle", 250*time.Millisecond, "pause between runs")
	flag.Func("processor-env", "an extra PROCESSOR_NAME=value for every processor run; repeatable (e.g. -processor-env PROCESSOR_LINEAGE_HEADERS=false)", func(kv string) error {
		if k, _, ok := strings.Cut(kv, "="); !ok || !strings.HasPrefix(k, "PROCESSOR_") {
			return fmt.Errorf("%q is not PROCESSOR_NAME=value", kv)
		}
		o.processorEx = append(o.processorEx, kv)
		return nil
	})
	flag.StringVar(&o.baseline, "baseline", "", "a processor binary built from another commit, run by the systems named <key>@base beside this tree's (e.g. -systems processor,processor@base)")
	flag.BoolVar(&o.crash, "crash", false, "after each latency phase, kill the system (SIGKILL), restart it on the same state and measure the time until a new record shows on the output (\"ready after crash\")")
	flag.BoolVar(&o.restore, "restore", false, "add the restore rows ("+strings.Join(restoreKeysOf(), ", ")+"): a count over 1,000,000 keys, killed after 10 s of updates and restarted with the state kept or wiped; the time until it processes again, once a round at the first size and interval")
	flag.StringVar(&o.note, "note", os.Getenv("BENCH_NOTE"), "a line about the conditions for the results file, e.g. \"other test runs used the machine\" ($BENCH_NOTE)")
	flag.Parse()

	m, ok := modes[o.mode]
	if !ok {
		fatalf(2, "-mode must be quick or full, not %q", o.mode)
	}
	if o.records == 0 {
		o.records = m.records
	}
	if o.rounds == 0 {
		o.rounds = m.rounds
	}
	if o.liveRate == 0 {
		o.liveRate = m.liveRate
	}
	if o.liveFor == 0 {
		o.liveFor = m.liveFor
	}
	if o.runTimeout == 0 {
		o.runTimeout = 2*time.Minute + time.Duration(o.records)*time.Millisecond
	}
	var err error
	if o.sizes, err = parseInts(sizes); err != nil {
		fatalf(2, "-sizes: %v", err)
	}
	if o.intervals, err = parseDurations(intervals); err != nil {
		fatalf(2, "-intervals: %v", err)
	}
	o.systems = parseSystems(systems, o)
	if o.records < 1 || o.rounds < 1 || o.partitions < 1 || o.liveRate < 1 || o.liveFor <= 0 {
		fatalf(2, "-records, -rounds, -partitions, -live-rate and -live-for must be positive")
	}

	ctx, stop := interrupt.Context()
	defer stop()
	if err := run(ctx, o); err != nil {
		fatalf(1, "%v", err)
	}
}

// parseSystems is -systems, with the restore rows when -restore is set;
// an unknown key, or a baseline key without -baseline, exits 2.
func parseSystems(systems string, o options) []string {
	keys := strings.Split(systems, ",")
	if o.restore {
		keys = withRestore(keys)
	}
	for _, k := range keys {
		if _, ok := systemByKey(k); !ok {
			fatalf(2, "-systems: unknown system %q (known: %s, and a processor system's key with %s for the -baseline build)", k, strings.Join(systemKeys(), ", "), baseSuffix)
		}
		if strings.HasSuffix(k, baseSuffix) && o.baseline == "" {
			fatalf(2, "-systems: %s runs the -baseline build: give -baseline PATH (a processor binary built from another commit)", k)
		}
	}
	return keys
}

// run is the whole benchmark: build, broker, pre-load, rounds, table.
func run(ctx context.Context, o options) error {
	began := time.Now()
	loadBefore := loadAvg()
	env, err := prepare(ctx, o, loadBefore)
	if err != nil {
		return err
	}
	buildDone := time.Now()

	b, err := openBroker(ctx, o, env)
	if err != nil {
		return err
	}
	defer b.close()
	say("broker: %s", b.describe)
	b.sweepGroups(ctx)

	env.avail = availability(o, env)
	for _, k := range o.systems {
		if why := env.avail[k]; why != "" {
			s, _ := systemByKey(k)
			say("%s: not available: %s", s.label, why)
		}
	}

	runID := time.Now().Format("20060102-150405")
	prefix := "bench-" + runID
	var created []string // the input topics, deleted at the end
	defer func() {
		if o.keep {
			say("kept the topics and groups of this run (names start with %s)", prefix)
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b.cleanup(cctx, created, nil)
		b.sweepGroups(cctx)
	}()

	if needsAvro(o) {
		if err := env.startRegistry(ctx); err != nil {
			return fmt.Errorf("the schema registry of the Avro rows: %w", err)
		}
	}
	if needsLookup(o) {
		if err := env.startLookup(ctx); err != nil {
			return fmt.Errorf("the lookup service of the http rows: %w", err)
		}
	}
	inputs, err := preloadInputs(ctx, o, env, b, prefix, &created)
	if err != nil {
		return err
	}
	preloadDone := time.Now()

	results, err := runRounds(ctx, o, env, b, inputs, prefix)
	if err != nil {
		return err
	}
	rep := &report{
		o: o, env: env, broker: b.describe, began: began, loadBefore: loadBefore, loadAfter: loadAvg(),
		buildTime: buildDone.Sub(began), preloadTime: preloadDone.Sub(buildDone), total: time.Since(began),
		inputs: inputs, results: results,
	}
	return writeResults(o, rep, env.logs)
}

// prepare goes to the repository's root, empties the logs directory and
// builds the programs (or, with -no-build, finds them).
func prepare(ctx context.Context, o options, loadBefore string) (*environment, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	baseline := ""
	if o.baseline != "" {
		if baseline, err = filepath.Abs(o.baseline); err != nil {
			return nil, fmt.Errorf("-baseline: %w", err)
		}
		if _, err := os.Stat(baseline); err != nil {
			return nil, fmt.Errorf("-baseline: %w", err)
		}
	}
	if err := os.Chdir(root); err != nil {
		return nil, err
	}
	cache := filepath.Join(root, "bench", ".cache")
	logs := filepath.Join(cache, "logs")
	if err := os.RemoveAll(logs); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	say("make bench: mode %s, %d records per size, %s, sizes %v, commit intervals %v, %d cores, load average %s",
		o.mode, o.records, plural(o.rounds, "round"), o.sizes, o.intervals, runtime.NumCPU(), loadBefore)

	env := &environment{root: root, cache: cache, logs: logs, baseline: baseline}
	if !o.noBuild {
		if err := env.build(ctx, o); err != nil {
			return nil, err
		}
	} else {
		env.locate(o)
	}
	return env, nil
}

// runRounds runs every available system on every input and commit
// interval, round after round.
func runRounds(ctx context.Context, o options, env *environment, b *broker, inputs map[int]*input, prefix string) ([]*result, error) {
	var results []*result
	for round := 1; round <= o.rounds; round++ {
		for _, size := range o.sizes {
			for _, iv := range o.intervals {
				for _, k := range o.systems {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					s, _ := systemByKey(k)
					if env.avail[k] != "" || !s.runsAt(o, size, iv) {
						continue
					}
					spec, err := newSpec(o, env, s, inputs[size], prefix, round, iv)
					if err != nil {
						return nil, err
					}
					results = append(results, runAndClean(ctx, o, env, b, spec))
					time.Sleep(o.settle)
				}
			}
		}
	}
	return results, nil
}

// newSpec is the run of s on in with commit interval iv in round: its
// topics, group, log, state directory and, with a recovery phase, its
// static member ID.
func newSpec(o options, env *environment, s system, in *input, prefix string, round int, iv time.Duration) (*runSpec, error) {
	// A topic name has no '@': "aggregate@base" runs as aggregate.base.
	name := fmt.Sprintf("%s-%d-%s-%s-r%d", prefix, in.size, durName(iv), strings.ReplaceAll(s.key, baseSuffix, ".base"), round)
	table := in.table
	in = in.of(s.format)
	if s.onePartition {
		in = in.single
	}
	spec := &runSpec{
		sys: s, name: name, group: name, round: round, interval: iv, in: in,
		out: name + "-out", live: name + "-live", log: filepath.Join(env.logs, strings.TrimPrefix(name, prefix+"-")+".log"),
		stateDir: filepath.Join(env.cache, "kstreams-state", name), table: table,
	}
	if s.ownInput {
		// Pre-loaded by prepare, deleted with the run.
		spec.in = &input{topic: name + "-in", size: in.size, records: in.records, format: in.format, gen: in.gen}
		if s.records > 0 {
			spec.in.records = s.records
		}
		if s.keys > 0 {
			size, keys := in.size, s.keys
			spec.in.gen = func(n int64) *kgo.Record { return sample.Order(n, keys, size) }
		}
		spec.live = spec.in.topic
	}
	if len(s.stores) > 0 || s.ownInput {
		dir, err := os.MkdirTemp("", "bench-state-")
		if err != nil {
			return nil, fmt.Errorf("the state directory of %s: %w", name, err)
		}
		spec.stateDir = dir
	}
	if crashes(o, spec) {
		spec.member = name + "-1"
	}
	return spec, nil
}

// runAndClean runs one spec, then deletes what the run left (unless
// -keep) and notes a system that turned out not to be available.
func runAndClean(ctx context.Context, o options, env *environment, b *broker, spec *runSpec) *result {
	r := runOne(ctx, o, env, b, spec)
	_ = os.RemoveAll(spec.stateDir)
	if !o.keep {
		// The outputs go as soon as they are counted: a full
		// run would otherwise keep gigabytes of copies.
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		b.cleanup(cctx, b.withInternal(cctx, spec.group, runTopics(spec)), []string{spec.group})
		cancel()
	}
	if r.unavailable != "" {
		env.avail[spec.sys.key] = r.unavailable
		say("%s: not available: %s", spec.sys.label, r.unavailable)
	}
	return r
}

// runTopics are the topics a run created: its output, its live topic (for
// an ownInput row its own input), and the changelogs of its stores
// (Kafka Streams names them the same way, <application.id>-<store>-changelog,
// and its application ID is the run's group). Repartition topics, and any
// other topic named after the group, are added by broker.withInternal.
func runTopics(s *runSpec) []string {
	topics := []string{s.out, s.live}
	for _, st := range s.sys.stores {
		topics = append(topics, changelogTopic(s.group, st))
	}
	return topics
}

// changelogTopic is the processor's changelog topic of store in group,
// <group>-<store>-changelog (state.ChangelogTopic, not imported: the
// benchmark's harness does not build the state store).
func changelogTopic(group, store string) string { return group + "-" + store + "-changelog" }

// writeResults prints the table and writes it to -out, every run's figures
// beside it as JSON.
func writeResults(o options, rep *report, logs string) error {
	md := rep.markdown()
	fmt.Println()
	fmt.Print(md)
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
		return err
	}
	raw, err := rep.json()
	if err != nil {
		return err
	}
	rawPath := strings.TrimSuffix(o.out, filepath.Ext(o.out)) + ".json"
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		return err
	}
	say("written to %s (every run: %s); per-run logs in %s", o.out, rawPath, logs)
	return nil
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func fatalf(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(code)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive whole number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q is not a positive Go duration", f)
		}
		out = append(out, d)
	}
	return out, nil
}

// durName is a duration as it goes into topic names: 100ms, 1s.
func durName(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	return strconv.Itoa(int(d/time.Millisecond)) + "ms"
}

// moduleRoot is the directory of go.mod, found upwards from the working
// directory, so that the command runs from anywhere in the repository.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "bench", "copier")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the processor's repository (no go.mod with bench/copier above %s)", dir)
		}
		dir = parent
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
