package chaos

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/internal/testkit/wasmtest"
)

// drillVar, set to 1, runs the drills: the short chaos runs of
// TestChaosShort and TestChaosPostgres, which make drill (and with it make
// chaos) sets, and make test does not. They run the chaos tool, not a
// test's own processors, for most of a minute each.
const drillVar = "PROCESSOR_TEST_DRILLS"

// drill skips t unless drillVar is set to 1.
func drill(t *testing.T) {
	t.Helper()
	if os.Getenv(drillVar) != "1" {
		t.Skipf("a drill: make drill (or make chaos) runs it, or set %s=1", drillVar)
	}
}

// chaosTimeout bounds one short chaos run; then chaos is killed, and the
// processes it started with it (killTree).
const chaosTimeout = 10 * time.Minute

// killTree SIGKILLs p and then the processes descended from it, as /proc
// listed them just before (on Linux; elsewhere only p is killed): killed
// alone, chaos would leave its processors and broker running.
func killTree(p *os.Process) error {
	children := map[int][]int{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...", where comm may hold spaces and ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var tree []int
	var walk func(int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			tree = append(tree, c)
			walk(c)
		}
	}
	walk(p.Pid)
	err := p.Kill() // first, so that it starts no more processes
	for _, pid := range tree {
		if q, ferr := os.FindProcess(pid); ferr == nil {
			_ = q.Kill()
		}
	}
	return err
}

// The short chaos run: three processor processes in one group while input
// keeps arriving, with one of each fault (SIGKILL and restart, SIGTERM and
// restart, SIGSTOP past the session timeout, scale out, broker restart) and
// 5% of transactions aborted on purpose; then eoscheck must find no
// anomaly. On kfake it runs with the identity transform and the fail
// policy, with jq and the three error policies mixed in one group
// (instance 1 fails, 2 dead-letters, 3 skips), where any dead letter or
// missing output is a good record given up on, and with jq under
// PROCESSOR_ORDERING=key, and with the http transform calling the
// drill's service (down for a while: httpdown). The broker fault restarts
// the devbroker process cleanly; against PROCESSOR_TEST_BROKERS (jq and
// mixed policies) there is no broker fault (the three-node cluster's is in
// make chaos-kafka). A drill: it runs under make drill, not make test.
func TestChaosShort(t *testing.T) {
	drill(t)
	itest.Binary(t)
	run := func(t *testing.T, args ...string) string {
		return runChaos(t, nil, append([]string{"-records", "15000", "-rate", "3000", "-iterations", "5", "-pause", "1s"}, args...)...)
	}
	t.Run("kfake/identity", func(t *testing.T) { run(t, "-embedded", "-transforms", "identity", "-policies", "fail") })
	t.Run("kfake/jq-policies", func(t *testing.T) { run(t, "-embedded", "-transforms", "jq", "-policies", "fail,dlq,skip") })
	// PROCESSOR_ORDERING=key, judged by key too (eoscheck's key-order);
	// the jq chain is not ordered, so its workers still share runs.
	t.Run("kfake/jq-ordering-key", func(t *testing.T) {
		run(t, "-embedded", "-transforms", "jq", "-policies", "dlq,skip", "-ordering", "key")
	})
	// The http transform calling the drill's own service, 8 requests a
	// partition in flight under key ordering, while the service answers
	// 503 for a while (httpdown), an instance is SIGKILLed and SIGTERMed
	// and the broker restarts: judged one to one and by key order, as jq.
	t.Run("kfake/http-ordering-key", func(t *testing.T) {
		out := run(t, "-embedded", "-transforms", "jq,http", "-policies", "dlq,skip", "-ordering", "key",
			"-faults", "kill,httpdown,term,broker")
		m := regexp.MustCompile(`http service: (\d+) requests answered, (\d+) refused while down`).FindStringSubmatch(out)
		if m == nil || m[1] == "0" || m[2] == "0" {
			t.Errorf("the service answered no request, or refused none while down: %q", m)
		}
	})
	// At least once under the same faults: eoscheck finds nothing lost,
	// and inputs written twice (the SIGKILLed and aborted batches), which
	// it counts instead of failing.
	t.Run("kfake/at-least-once", func(t *testing.T) {
		// A third of the batches aborted on purpose: with the default 5%, a
		// run slowed down by a loaded machine has few, large batches and
		// may abort none, and a SIGKILL may land between two batches.
		out := run(t, "-embedded", "-guarantee", "at_least_once", "-transforms", "identity", "-policies", "fail",
			"-faults", "kill,abort,term,kill,broker", "-abort-rate", "0.3")
		if !strings.Contains(out, "inputs repeated") {
			t.Errorf("at least once under SIGKILL and aborts wrote no input twice; the drill should show the expected duplicates")
		}
	})
	if b := os.Getenv(kafkatest.BrokersVar); b != "" {
		t.Run("kafka", func(t *testing.T) {
			run(t, "-brokers", b, "-faults", "kill,term,stop,scale,abort", "-transforms", "jq", "-policies", "fail,dlq,skip")
		})
	}
}

// The short chaos run with Avro records (chaos -value-format avro): the
// drill's in-process Schema Registry, the input's schema changed halfway
// (a BACKWARD compatible added field) while the faults land, the
// instances decoding Avro for jq and encoding the outputs with the output
// subject's schema, and the notjson class as values the decode stage
// fails (a dead letter or skipped). eoscheck must find no anomaly, and
// every visible output must decode with the output schema to what its
// input makes. On kfake with one SIGKILL, SIGTERM, devbroker restart and
// scale-out, and a second SIGKILL, 5% aborts; against
// PROCESSOR_TEST_BROKERS the same without the broker fault.
func TestChaosShortAvro(t *testing.T) {
	drill(t)
	itest.Binary(t)
	run := func(t *testing.T, args ...string) string {
		return runChaos(t, nil, append([]string{"-value-format", "avro", "-records", "6000", "-rate", "1500", "-iterations", "5",
			"-pause", "1s", "-poison-every", "200"}, args...)...)
	}
	t.Run("kfake", func(t *testing.T) {
		out := run(t, "-embedded", "-faults", "kill,term,broker,scale,abort")
		if !strings.Contains(out, "v2 (id") {
			t.Errorf("no second input schema version in the report")
		}
	})
	if b := os.Getenv(kafkatest.BrokersVar); b != "" {
		t.Run("kafka", func(t *testing.T) { run(t, "-brokers", b, "-faults", "kill,term,scale,abort") })
	}
}

// runChaos runs the built chaos binary with args (after -bin and -logs)
// and env added to the test's environment, fails the test unless it ends
// with every anomaly count zero, logs its report and returns its output.
// The processors' logs are deleted after a passing run and kept after a
// failing one (chaos's report names their folder).
func runChaos(t *testing.T, env []string, args ...string) string {
	t.Helper()
	logs, err := os.MkdirTemp("", "chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(logs)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(itest.BinDir, "chaos"), append([]string{"-bin", itest.BinDir, "-logs", logs}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// Killed at the deadline with what it started; WaitDelay lets
	// CombinedOutput return even if a process still holds its output.
	cmd.Cancel = func() error { return killTree(cmd.Process) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("chaos did not finish within %s, killed: %v\n%s", chaosTimeout, err, out)
	}
	if err != nil || !strings.Contains(string(out), "every anomaly count is zero") {
		t.Fatalf("chaos: %v\n%s", err, out)
	}
	t.Logf("%s", out[strings.Index(string(out), "chaos run:"):])
	return string(out)
}

// The short stateful chaos run (chaos with aggregate last in -transforms):
// three processor processes count by record key, each in a state
// directory of its own kept across its restarts, while one SIGKILL, one
// wipe (SIGKILL, the state directory deleted, a restart that rebuilds
// from the changelogs), a scale-out, a SIGTERM and the scale-in land and
// 5% of transactions abort; every move of a partition restores its state
// from the changelog. eoscheck -check aggregate must find every key's
// counts running 1, 2, 3, ... up to its inputs taken, and the lineage
// checks clean. Under PROCESSOR_ORDERING=partition with aggregate alone
// and the three policies mixed (it fails no record), and under key with
// jq before it and the notjson poison class (dead-lettered or skipped
// before it counts); the same with the count example WebAssembly plugin
// as the counter (its store through PROCESSOR_WASM_STORES); on kfake,
// and against PROCESSOR_TEST_BROKERS the same. A drill: it runs under
// make drill, not make test.
//
// Two more chains, each on kfake and the broker: binary-keys, the input
// keyed by the bytes of Java's LongSerializer and IntegerSerializer (most
// not UTF-8, many once merged in the store), each key's count apart and
// named in base64; and grouped, orders keyed by order id counted per
// customer (PROCESSOR_AGGREGATE_BY=.customer, every customer in every
// input partition), judged by eoscheck -group-by .customer: one run
// 1..N per customer, which needs the repartition topic. And two more:
// windows-close, a count in 2 s windows with EMIT=close judged by
// eoscheck -check windows, and dedupe, by the inputs' seq with every
// tenth input re-sent, judged by eoscheck -check dedupe. Alone:
//
//	PROCESSOR_TEST_DRILLS=1 go test -count=1 -v -run 'TestChaosShortStateful/kfake/grouped' ./integration/chaos/
func TestChaosShortStateful(t *testing.T) {
	drill(t)
	itest.Binary(t)
	run := func(t *testing.T, args ...string) string {
		out := runChaos(t, nil, append([]string{"-records", "12000", "-rate", "1000", "-iterations", "5", "-pause", "1s",
			"-faults", "kill,wipe,scale,term,scale,abort"}, args...)...)
		wants := []string{"count-repeat", "aggregate counts", "rebuilt"}
		switch {
		case slices.Contains(args, "-window"):
			wants = []string{"window-duplicate", "late-wrong", "windows closed", "rebuilt"}
		case slices.Contains(args, "jq,dedupe"):
			wants = []string{"dedupe by seq: every seq passes once", "dedupe-passed", "dedupe-missing", "late-wrong", "duplicates filtered", "re-sent", "rebuilt"}
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in the report: the aggregate or windows check, or the wipe's rebuild, is missing", want)
			}
		}
		return out
	}
	partition := []string{"-transforms", "aggregate", "-policies", "fail,dlq,skip", "-ordering", "partition"}
	key := []string{"-transforms", "jq,aggregate", "-policies", "dlq,skip", "-poison-every", "200", "-ordering", "key"}
	// The count example plugin's store, through the same faults.
	module := filepath.Join(t.TempDir(), "count.wasm")
	if err := wasmtest.Build("../../examples/wasm/count", module, "-buildmode=c-shared"); err != nil {
		t.Fatal(err)
	}
	// A windowed count, one final row per key and window (EMIT=close).
	windows := []string{"-transforms", "jq,aggregate", "-window", "2s", "-policies", "dlq,skip", "-poison-every", "200", "-ordering", "partition"}
	// A dedupe by the inputs' seq, every tenth input a re-send of a recent
	// one (half of those late beyond GRACE): every seq passes exactly once
	// (an aborted transaction's ids kept would lose its retried inputs),
	// its re-sends never, the late ones in the late topic once
	// (eoscheck -check dedupe).
	dedupe := []string{"-transforms", "jq,dedupe", "-policies", "dlq,skip", "-poison-every", "200", "-ordering", "partition"}
	wasm := []string{"-transforms", "jq,wasm", "-wasm-module", module, "-policies", "dlq,skip", "-poison-every", "200", "-ordering", "key"}
	// Keys of Java's LongSerializer and IntegerSerializer, most not
	// UTF-8: each counted apart, its count naming it in base64.
	binaryKeys := []string{"-transforms", "jq,aggregate", "-keys", "binary", "-policies", "dlq,skip", "-poison-every", "200", "-ordering", "key"}
	// Orders keyed by order id, counted per customer (BY .customer):
	// one run 1..N per customer across every input partition, through
	// the repartition topic. Settings for the hop go in groupedEnv
	// (-env PROCESSOR_...=...).
	grouped := []string{"-transforms", "jq,aggregate", "-keys", "orders", "-customers", "8", "-policies", "dlq,skip", "-poison-every", "200",
		"-ordering", "partition"}
	for _, kv := range groupedEnv {
		grouped = append(grouped, "-env", kv)
	}
	// The same orders counted per customer in 2 s windows with
	// EMIT=close: the windows close behind the hop, each final row
	// naming an order by its input (eoscheck -check windows -group-by).
	groupedWindows := append(slices.Clone(grouped), "-window", "2s")
	t.Run("kfake/ordering-partition", func(t *testing.T) { run(t, append([]string{"-embedded"}, partition...)...) })
	t.Run("kfake/ordering-key", func(t *testing.T) { run(t, append([]string{"-embedded"}, key...)...) })
	t.Run("kfake/wasm-counter", func(t *testing.T) { run(t, append([]string{"-embedded"}, wasm...)...) })
	t.Run("kfake/windows-close", func(t *testing.T) { run(t, append([]string{"-embedded"}, windows...)...) })
	t.Run("kfake/dedupe", func(t *testing.T) { run(t, append([]string{"-embedded"}, dedupe...)...) })
	t.Run("kfake/binary-keys", func(t *testing.T) { run(t, append([]string{"-embedded"}, binaryKeys...)...) })
	t.Run("kfake/grouped", func(t *testing.T) { runGrouped(t, run, append([]string{"-embedded"}, grouped...)) })
	t.Run("kfake/grouped-windows", func(t *testing.T) { runGrouped(t, run, append([]string{"-embedded"}, groupedWindows...)) })
	if b := os.Getenv(kafkatest.BrokersVar); b != "" {
		t.Run("kafka/ordering-partition", func(t *testing.T) { run(t, append([]string{"-brokers", b}, partition...)...) })
		t.Run("kafka/ordering-key", func(t *testing.T) { run(t, append([]string{"-brokers", b}, key...)...) })
		t.Run("kafka/wasm-counter", func(t *testing.T) { run(t, append([]string{"-brokers", b}, wasm...)...) })
		t.Run("kafka/windows-close", func(t *testing.T) { run(t, append([]string{"-brokers", b}, windows...)...) })
		t.Run("kafka/dedupe", func(t *testing.T) { run(t, append([]string{"-brokers", b}, dedupe...)...) })
		t.Run("kafka/binary-keys", func(t *testing.T) { run(t, append([]string{"-brokers", b}, binaryKeys...)...) })
		t.Run("kafka/grouped", func(t *testing.T) { runGrouped(t, run, append([]string{"-brokers", b}, grouped...)) })
		t.Run("kafka/grouped-windows", func(t *testing.T) { runGrouped(t, run, append([]string{"-brokers", b}, groupedWindows...)) })
	}
}

// groupedEnv are the grouped drill's settings beyond its chain's, as
// chaos -env NAME=value pairs: none, as a stage that groups by a member
// of the value hops through its repartition topic without one.
var groupedEnv []string

// runGrouped runs the grouped drill and checks that its counts went
// through a repartition topic.
func runGrouped(t *testing.T, run func(*testing.T, ...string) string, args []string) {
	out := run(t, args...)
	per := "groups by .customer" // the aggregate check's totals; the windows check's name no groups
	if slices.Contains(args, "-window") {
		per = "count by .customer"
	}
	if !strings.Contains(out, "-repartition: ") || !strings.Contains(out, per) {
		t.Errorf("no repartition topic, or no count per customer, in the report")
	}
}

// The short join drill (chaos with join last in -transforms): three
// processor processes join every input with its key's row in a table
// topic of the run's own, pre-loaded with a row for three in four keys
// and written on while the input arrives and the faults land (new rows,
// updates and tombstones every 200 ms, every fourth table transaction
// aborted), through a SIGKILL, a wipe (the state directory deleted: the
// table rebuilt from the table topic), a scale-out, a SIGTERM and the
// scale-in, 5% of the processors' transactions aborted. eoscheck -check
// join must find every visible row a committed version of its key
// (join-invented), none older than an earlier input of its partition and
// key saw (join-stale), and the left join's every input written
// (join-missing), besides the checks by lineage. On kfake a left join,
// co-partitioned, with jq before it and the notjson poison class (a dead
// letter or skipped before the join); against PROCESSOR_TEST_BROKERS an
// inner join of a global table (three partitions to the input's six),
// its filtered inputs judged against the table. Alone:
//
//	PROCESSOR_TEST_DRILLS=1 go test -count=1 -v -run 'TestChaosShortJoin' ./integration/chaos/
func TestChaosShortJoin(t *testing.T) {
	drill(t)
	itest.Binary(t)
	run := func(t *testing.T, args ...string) {
		out := runChaos(t, nil, append([]string{"-records", "8000", "-rate", "1000", "-iterations", "5", "-pause", "1s",
			"-faults", "kill,wipe,scale,term,scale,abort"}, args...)...)
		for _, want := range []string{"join-invented", "join-stale", "join-missing", "inputs joined with a row", "rebuilt", "aborted ("} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in the report: the join check, the table's updates or the wipe's rebuild is missing", want)
			}
		}
		// The table must have been read and joined: eoscheck's totals,
		// "N keys, J inputs joined with a row, M without, V table records".
		m := regexp.MustCompile(`(\d+) inputs joined with a row, \d+ without, (\d+) table records`).FindStringSubmatch(out)
		if m == nil || m[1] == "0" || m[2] == "0" {
			t.Errorf("no input joined with a row, or no table record read: %q", m)
		}
	}
	t.Run("kfake/co-partitioned-left", func(t *testing.T) {
		run(t, "-embedded", "-transforms", "jq,join", "-join-type", "left", "-policies", "dlq,skip", "-poison-every", "200")
	})
	if b := os.Getenv(kafkatest.BrokersVar); b != "" {
		t.Run("kafka/global-inner", func(t *testing.T) {
			run(t, "-brokers", b, "-transforms", "jq,join", "-join-type", "inner", "-join-mode", "global", "-policies", "fail,dlq,skip")
		})
	}
}
