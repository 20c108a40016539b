package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Each instance gets the drill's settings, its own stable IDs and its
// policy in turn; a run into PostgreSQL names the run's tables instead of
// an output topic.
func TestInstanceEnvironment(t *testing.T) {
	d := &driver{
		o: options{sessionTimeout: 6 * time.Second, txnTimeout: 5 * time.Second, abortRate: 0.05,
			faults: []string{"kill", "abort"}, transforms: []string{"jq"}, jqExpr: ".seen = true",
			policies: []string{"fail", "dlq"}, guarantee: "exactly_once", sink: "kafka"},
		brokers: []string{"127.0.0.1:1"}, group: "chaos-x", in: "chaos-in-x", out: "chaos-out-x", dlq: "chaos-dlq-x",
	}
	want := []string{
		"PROCESSOR_BROKERS=127.0.0.1:1", "PROCESSOR_GROUP=chaos-x", "PROCESSOR_INPUT_TOPICS=chaos-in-x",
		"PROCESSOR_TRANSACTIONAL_ID=chaos-x-2", "PROCESSOR_INSTANCE_ID=chaos-x-2",
		"PROCESSOR_SESSION_TIMEOUT=6s", "PROCESSOR_TRANSACTION_TIMEOUT=5s", "PROCESSOR_COMMIT_INTERVAL=200ms",
		"PROCESSOR_WORKERS=2", "PROCESSOR_HTTP_ADDR=127.0.0.1:0", "PROCESSOR_PROGRESS_INTERVAL=250ms", "PROCESSOR_LOG_FORMAT=json",
		"PROCESSOR_OUTPUT_TOPIC=chaos-out-x", "PROCESSOR_TEST_ABORT_RATE=0.05",
		"PROCESSOR_TRANSFORMS=jq", "PROCESSOR_GUARANTEE=exactly_once", "PROCESSOR_JQ_EXPR=.seen = true",
		"PROCESSOR_ON_ERROR=dlq", "PROCESSOR_DLQ_TOPIC=chaos-dlq-x",
	}
	same(t, "instance 2 into Kafka", d.instance(2).Env(), want)

	first := d.instance(1).Env()
	if !slices.Contains(first, "PROCESSOR_ON_ERROR=fail") || slices.Contains(first, "PROCESSOR_DLQ_TOPIC=chaos-dlq-x") {
		t.Errorf("instance 1: %v, want policy fail and no dead-letter topic", first)
	}

	d.o.sink, d.o.pgURL, d.out, d.dlq, d.table, d.deadTable = "postgres", "postgres://h/db", "", "", "chaos_x", "chaos_dl_x"
	d.o.faults = []string{"kill"}
	want = slices.DeleteFunc(slices.Clone(want), func(kv string) bool {
		return kv == "PROCESSOR_OUTPUT_TOPIC=chaos-out-x" || kv == "PROCESSOR_TEST_ABORT_RATE=0.05" || kv == "PROCESSOR_DLQ_TOPIC=chaos-dlq-x"
	})
	want = append(want, "PROCESSOR_SINK=postgres", "PROCESSOR_POSTGRES_URL=postgres://h/db?application_name=chaos-x-2",
		"PROCESSOR_POSTGRES_TABLE=chaos_x", "PROCESSOR_POSTGRES_DEAD_LETTER_TABLE=chaos_dl_x")
	same(t, "instance 2 into PostgreSQL", d.instance(2).Env(), want)

	d.o.ordering = "key"
	same(t, "instance 2 with -ordering key", d.instance(2).Env(), append(want, "PROCESSOR_ORDERING=key"))
}

// In the stateful mode each instance counts by record key in a state
// directory of its own, the same across its restarts.
func TestInstanceEnvironmentStateful(t *testing.T) {
	d := &driver{
		o: options{sessionTimeout: 6 * time.Second, txnTimeout: 5 * time.Second, transforms: []string{"jq", "aggregate"},
			jqExpr: ".seen = true", policies: []string{"skip"}, guarantee: "exactly_once", sink: "kafka", stateDir: "/tmp/s"},
		brokers: []string{"127.0.0.1:1"}, group: "chaos-x", in: "chaos-in-x", out: "chaos-out-x",
	}
	for id, dir := range map[int]string{1: "/tmp/s/instance-1", 4: "/tmp/s/instance-4"} {
		env := d.instance(id).Env()
		for _, kv := range []string{"PROCESSOR_TRANSFORMS=jq,aggregate", "PROCESSOR_AGGREGATE_FUNCTION=count", "PROCESSOR_STATE_DIR=" + dir} {
			if !slices.Contains(env, kv) {
				t.Errorf("instance %d: no %s in %v", id, kv, env)
			}
		}
	}
	if env := d.instance(1).Env(); !slices.Equal(env, d.instance(1).Env()) {
		t.Errorf("instance 1's environment changes between starts: %v", env)
	}
}

// The report's restore totals come from the processors' "state restored"
// lines, from where a restart's log begins.
func TestReadRestores(t *testing.T) {
	log := filepath.Join(t.TempDir(), "processor-1.log")
	first := `{"level":"INFO","msg":"state restored","topic":"g-aggregate-changelog","partition":0,"records":0,"from":10,"to":10,"rebuilt":false}` + "\n"
	second := `{"level":"INFO","msg":"progress","committed":3}` + "\n" +
		`{"level":"INFO","msg":"state restored","topic":"g-aggregate-changelog","partition":1,"records":40,"from":0,"to":41,"rebuilt":true}` + "\n" +
		`{"level":"INFO","msg":"state restored","topic":"g-aggregate-changelog","partition":2,"records":7,"from":0,"to":8,"rebuilt":true}` + "\n" +
		`{"level":"INFO","msg":"state restored","topic":"g-aggr` // cut by a SIGKILL
	if err := os.WriteFile(log, []byte(first+second), 0o644); err != nil {
		t.Fatal(err)
	}
	all, err := readRestores(log, 0)
	if err != nil || all != (restores{partitions: 3, rebuilt: 2, records: 47}) {
		t.Errorf("whole log: %+v, %v", all, err)
	}
	later, err := readRestores(log, int64(len(first)))
	if err != nil || later != (restores{partitions: 2, rebuilt: 2, records: 47}) {
		t.Errorf("from the restart: %+v, %v", later, err)
	}
}

// same compares two environments as sets: the order of distinct
// variables does not matter to the process.
func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Errorf("%s:\n got %v\nwant %v", what, g, w)
	}
}
