package main

import (
	"encoding/json"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A processor run sets what every run must (brokers, group, topics,
// transactional ID, commit interval, an ephemeral HTTP port), then the
// system's own settings, then -processor-env, which wins; the caller's
// PROCESSOR_* variables are not passed on.
func TestProcessorCommand(t *testing.T) {
	t.Setenv("PROCESSOR_WORKERS", "99")
	e := &environment{processor: "/bin/processor"}
	b := &broker{addrs: []string{"127.0.0.1:1"}}
	s := &runSpec{group: "g", in: &input{topic: "in"}, live: "live", out: "out", interval: 100 * time.Millisecond}
	common := []string{"PROCESSOR_BROKERS=127.0.0.1:1", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in,live",
		"PROCESSOR_OUTPUT_TOPIC=out", "PROCESSOR_TRANSACTIONAL_ID=g-p", "PROCESSOR_COMMIT_INTERVAL=100ms",
		"PROCESSOR_HTTP_ADDR=127.0.0.1:0", "PROCESSOR_LOG_FORMAT=json"}
	for key, own := range map[string][]string{
		"processor":     nil,
		"processor-alo": {"PROCESSOR_GUARANTEE=at_least_once"},
		"jq-1":          {"PROCESSOR_TRANSFORMS=jq", "PROCESSOR_JQ_EXPR=" + jqExpr, "PROCESSOR_WORKERS=1"},
		"jq-n":          {"PROCESSOR_TRANSFORMS=jq", "PROCESSOR_JQ_EXPR=" + jqExpr, "PROCESSOR_WORKERS=" + strconv.Itoa(runtime.NumCPU())},
		"jq-1-p1":       {"PROCESSOR_TRANSFORMS=jq", "PROCESSOR_JQ_EXPR=" + jqExpr, "PROCESSOR_WORKERS=1"},
		"jq-2-p1":       {"PROCESSOR_TRANSFORMS=jq", "PROCESSOR_JQ_EXPR=" + jqExpr, "PROCESSOR_WORKERS=2"},
	} {
		sys, _ := systemByKey(key)
		c, err := sys.cmd(e, b, s, []string{"PROCESSOR_WORKERS=7"})
		if err != nil {
			t.Fatal(err)
		}
		if c.Path != "/bin/processor" {
			t.Errorf("%s: runs %s", key, c.Path)
		}
		var got []string
		for _, kv := range c.Env {
			if strings.HasPrefix(kv, "PROCESSOR_") {
				got = append(got, kv)
			}
		}
		want := slices.Concat(common, own, []string{"PROCESSOR_WORKERS=7"})
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: PROCESSOR_* variables\n got %v\nwant %v", key, got, want)
		}
		if got[len(got)-1] != "PROCESSOR_WORKERS=7" {
			t.Errorf("%s: -processor-env is not last: %v", key, got)
		}
		if slices.Contains(c.Env, "PROCESSOR_WORKERS=99") {
			t.Errorf("%s: the caller's PROCESSOR_WORKERS is passed on", key)
		}
	}
}

// The Avro row is the jq-n chain with Avro in and out: the value format,
// the run's registry and the output schema file; without a registry it
// does not start.
func TestAvroCommand(t *testing.T) {
	sys, ok := systemByKey("jq-avro")
	if !ok || sys.format != avroFormat {
		t.Fatalf("no Avro row: %+v", sys)
	}
	b := &broker{addrs: []string{"127.0.0.1:1"}}
	s := &runSpec{group: "g", in: &input{topic: "in"}, live: "live", out: "out", interval: time.Second}
	if _, err := sys.cmd(&environment{processor: "/bin/processor"}, b, s, nil); err == nil {
		t.Error("the Avro row starts without a registry")
	}
	e := &environment{processor: "/bin/processor", registry: "http://127.0.0.1:2", avroOut: "/cache/avro-out.avsc"}
	c, err := sys.cmd(e, b, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"PROCESSOR_TRANSFORMS=jq", "PROCESSOR_JQ_EXPR=" + jqExpr, "PROCESSOR_WORKERS=" + strconv.Itoa(runtime.NumCPU()),
		"PROCESSOR_VALUE_FORMAT=avro", "PROCESSOR_SCHEMA_REGISTRY_URL=http://127.0.0.1:2", "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE=/cache/avro-out.avsc"} {
		if !slices.Contains(c.Env, kv) {
			t.Errorf("the Avro row's environment lacks %s: %v", kv, c.Env)
		}
	}
}

// The stateful rows read one input topic, their own (a stateful chain
// takes no second one), with the run's state directory and their
// transform's settings; without a state directory they do not start. The
// run's topics include the stores' changelogs, so that they are deleted
// with it.
func TestStatefulCommands(t *testing.T) {
	e := &environment{processor: "/bin/processor"}
	b := &broker{addrs: []string{"127.0.0.1:1"}}
	for key, own := range map[string][]string{
		"aggregate": {"PROCESSOR_TRANSFORMS=aggregate", "PROCESSOR_AGGREGATE_FUNCTION=sum", "PROCESSOR_AGGREGATE_FIELD=.amount_cents", "PROCESSOR_AGGREGATE_BY=.customer"},
		"dedupe":    {"PROCESSOR_TRANSFORMS=dedupe", "PROCESSOR_DEDUPE_BY=.order_id"},
	} {
		sys, ok := systemByKey(key)
		if !ok || !sys.ownInput || len(sys.stores) != 1 || sys.stores[0] != key {
			t.Fatalf("%s: not a stateful row with its own input and the store %s: %+v", key, key, sys)
		}
		s := &runSpec{sys: sys, group: "g", in: &input{topic: "g-in"}, live: "g-in", out: "g-out", interval: 100 * time.Millisecond}
		if _, err := sys.cmd(e, b, s, nil); err == nil {
			t.Errorf("%s: starts without a state directory", key)
		}
		s.stateDir = "/tmp/bench-state-1"
		c, err := sys.cmd(e, b, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := append(own, "PROCESSOR_INPUT_TOPICS=g-in", "PROCESSOR_STATE_DIR=/tmp/bench-state-1",
			"PROCESSOR_WORKERS="+strconv.Itoa(runtime.NumCPU()))
		for _, kv := range want {
			if !slices.Contains(c.Env, kv) {
				t.Errorf("%s: the environment lacks %s: %v", key, kv, c.Env)
			}
		}
		topics := runTopics(s)
		if !slices.Equal(topics, []string{"g-out", "g-in", "g-" + key + "-changelog"}) {
			t.Errorf("%s: the run's topics are %v", key, topics)
		}
	}
}

// A system named with baseSuffix is the same run from the -baseline
// binary: the same settings, another processor; the copier and Kafka
// Streams have no baseline build, and without -baseline the run fails.
func TestBaselineSystems(t *testing.T) {
	b := &broker{addrs: []string{"127.0.0.1:1"}}
	s := &runSpec{group: "g", in: &input{topic: "in"}, live: "live", out: "out", interval: time.Second, stateDir: "/tmp/s"}
	e := &environment{processor: "/bin/processor", baseline: "/old/processor"}
	for _, key := range []string{"processor", "jq-n", "aggregate", "dedupe"} {
		own, _ := systemByKey(key)
		base, ok := systemByKey(key + baseSuffix)
		if !ok {
			t.Fatalf("%s%s: not a system", key, baseSuffix)
		}
		if base.key != key+baseSuffix || !strings.HasSuffix(base.label, "baseline build") || !slices.Equal(base.stores, own.stores) {
			t.Errorf("%s%s: key %q label %q stores %v", key, baseSuffix, base.key, base.label, base.stores)
		}
		oc, err := own.cmd(e, b, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		bc, err := base.cmd(e, b, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if oc.Path != "/bin/processor" || bc.Path != "/old/processor" {
			t.Errorf("%s: runs %s, its baseline %s", key, oc.Path, bc.Path)
		}
		if !slices.Equal(oc.Env, bc.Env) {
			t.Errorf("%s: the baseline run's environment differs\n got %v\nwant %v", key, bc.Env, oc.Env)
		}
		if _, err := base.cmd(&environment{processor: "/bin/processor"}, b, s, nil); err == nil {
			t.Errorf("%s%s runs without -baseline", key, baseSuffix)
		}
	}
	for _, key := range []string{"copier", "copier-p1", "kstreams", "nosuch"} {
		if _, ok := systemByKey(key + baseSuffix); ok {
			t.Errorf("%s%s is a system", key, baseSuffix)
		}
	}
}

// The count row is the aggregate row with the count function: the same
// group key, store and input.
func TestAggregateCountCommand(t *testing.T) {
	sys, ok := systemByKey("aggregate-count")
	if !ok || !sys.ownInput || !slices.Equal(sys.stores, []string{"aggregate"}) || sys.pair != "kstreams-count" {
		t.Fatalf("no aggregate-count row paired with kstreams-count: %+v", sys)
	}
	s := &runSpec{sys: sys, group: "g", in: &input{topic: "g-in"}, live: "g-in", out: "g-out", interval: time.Second, stateDir: "/tmp/s"}
	c, err := sys.cmd(&environment{processor: "/bin/processor"}, &broker{addrs: []string{"127.0.0.1:1"}}, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"PROCESSOR_TRANSFORMS=aggregate", "PROCESSOR_AGGREGATE_FUNCTION=count", "PROCESSOR_AGGREGATE_BY=.customer",
		"PROCESSOR_INPUT_TOPICS=g-in", "PROCESSOR_STATE_DIR=/tmp/s"} {
		if !slices.Contains(c.Env, kv) {
			t.Errorf("the environment lacks %s: %v", kv, c.Env)
		}
	}
	if slices.ContainsFunc(c.Env, func(kv string) bool { return strings.HasPrefix(kv, "PROCESSOR_AGGREGATE_FIELD=") }) {
		t.Errorf("a count sets a field: %v", c.Env)
	}
}

// The join row joins with the run's customers table, by .customer, into
// .customer_row, co-partitioned; without a table it does not start.
func TestJoinCommand(t *testing.T) {
	sys, ok := systemByKey("join")
	if !ok || !sys.ownInput || !sys.table || sys.pair != "kstreams-join" {
		t.Fatalf("no join row with its own input and the table: %+v", sys)
	}
	e := &environment{processor: "/bin/processor"}
	b := &broker{addrs: []string{"127.0.0.1:1"}}
	s := &runSpec{sys: sys, group: "g", in: &input{topic: "g-in"}, live: "g-in", out: "g-out", interval: time.Second, stateDir: "/tmp/s"}
	if _, err := sys.cmd(e, b, s, nil); err == nil {
		t.Error("the join row starts without a table")
	}
	s.table = "bench-1-customers"
	c, err := sys.cmd(e, b, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"PROCESSOR_TRANSFORMS=join", "PROCESSOR_JOIN_TABLE=bench-1-customers", "PROCESSOR_JOIN_BY=.customer",
		"PROCESSOR_JOIN_INTO=.customer_row", "PROCESSOR_JOIN_MODE=co_partitioned", "PROCESSOR_INPUT_TOPICS=g-in",
		"PROCESSOR_STATE_DIR=/tmp/s", "PROCESSOR_WORKERS=" + strconv.Itoa(runtime.NumCPU())} {
		if !slices.Contains(c.Env, kv) {
			t.Errorf("the environment lacks %s: %v", kv, c.Env)
		}
	}
	for _, v := range []string{"PROCESSOR_JOIN_TABLE", "PROCESSOR_JOIN_BY", "PROCESSOR_JOIN_INTO", "PROCESSOR_JOIN_MODE"} {
		if !slices.Contains(sys.needs, v) {
			t.Errorf("the join row does not need %s: %v", v, sys.needs)
		}
	}
}

// The Kafka Streams rows run the jar with the topology as an argument:
// the identity row as before (its input and live topics, no more
// arguments), a stateful one on its own input topic alone, at one stream
// thread per core, the join one with the table topic last. Their
// changelogs are <group>-<store>-changelog, deleted with the run.
func TestKStreamsCommands(t *testing.T) {
	e := &environment{java: "/usr/bin/java", jar: "/cache/kstreams-bench.jar"}
	b := &broker{addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}
	cores := strconv.Itoa(runtime.NumCPU())
	for key, tail := range map[string][]string{
		"kstreams":        {"g-in,g-live", "g-out", "100", "STATE"},
		"kstreams-count":  {"g-in", "g-out", "100", "STATE", "count", cores},
		"kstreams-sum":    {"g-in", "g-out", "100", "STATE", "sum", cores},
		"kstreams-dedupe": {"g-in", "g-out", "100", "STATE", "dedupe", cores},
		"kstreams-join":   {"g-in", "g-out", "100", "STATE", "join", cores, "bench-1-customers"},
	} {
		sys, ok := systemByKey(key)
		if !ok || !isKStreams(key) {
			t.Fatalf("%s: not a Kafka Streams row", key)
		}
		state := t.TempDir()
		s := &runSpec{sys: sys, group: "g", in: &input{topic: "g-in"}, live: "g-live", out: "g-out", interval: 100 * time.Millisecond,
			stateDir: state, table: "bench-1-customers"}
		if sys.ownInput {
			s.live = s.in.topic
		}
		c, err := sys.cmd(e, b, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]string{"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", "/cache/kstreams-bench.jar", "127.0.0.1:1,127.0.0.1:2", "g"}, tail...)
		want[8] = state
		if c.Path != "/usr/bin/java" || !slices.Equal(c.Args, want) {
			t.Errorf("%s: runs %s %v\nwant %v", key, c.Path, c.Args, want)
		}
		if key == "kstreams" {
			continue
		}
		if !sys.ownInput || sys.pair != key {
			t.Errorf("%s: own input %v, compared with %q", key, sys.ownInput, sys.pair)
		}
		for _, st := range sys.stores {
			if !slices.Contains(runTopics(s), "g-"+st+"-changelog") {
				t.Errorf("%s: the run's topics %v lack the changelog of %s", key, runTopics(s), st)
			}
		}
		if sys.table {
			s.table = ""
			if _, err := sys.cmd(e, b, s, nil); err == nil {
				t.Errorf("%s: starts without a table", key)
			}
		}
	}
	if isKStreams("aggregate") || isKStreams("copier") {
		t.Error("a processor or copier row counts as Kafka Streams")
	}
}

// Each processor row that has a Kafka Streams pair is compared with a
// Kafka Streams row of the same kind of work: its own input, and the
// table if it reads one; the other rows with the identity row.
func TestPairs(t *testing.T) {
	pairs := map[string]string{}
	for _, s := range systems {
		pairs[s.key] = s.versus()
		if s.pair == "" || s.topology != "" {
			continue
		}
		ks, ok := systemByKey(s.pair)
		if !ok || ks.topology == "" || ks.ownInput != s.ownInput || ks.table != s.table {
			t.Errorf("%s is compared with %s: %+v", s.key, s.pair, ks)
		}
	}
	for k, want := range map[string]string{"processor": "kstreams", "jq-n": "kstreams", "aggregate": "kstreams-sum",
		"aggregate-count": "kstreams-count", "dedupe": "kstreams-dedupe", "join": "kstreams-join", "kstreams-sum": "kstreams-sum"} {
		if pairs[k] != want {
			t.Errorf("%s is compared with %s, want %s", k, pairs[k], want)
		}
	}
	if base, _ := systemByKey("dedupe" + baseSuffix); base.versus() != "kstreams-dedupe" {
		t.Errorf("dedupe%s is compared with %s", baseSuffix, base.versus())
	}
}

// The customers table has one row for each customer key of the orders,
// the warm-up record's included, keyed by it, its value JSON naming it.
func TestCustomersTable(t *testing.T) {
	table := customersTable("bench-1")
	if table.topic != "bench-1-customers" {
		t.Errorf("the table's topic is %s", table.topic)
	}
	orders := &input{size: 100}
	keys := map[string]bool{}
	for n := int64(-1); n < 5*customers; n++ {
		keys[string(orders.record(n).Key)] = true
	}
	rows := map[string]bool{}
	for n := range int64(table.records) {
		r := table.record(n)
		var v struct {
			Customer string `json:"customer"`
			Tier     string `json:"tier"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("row %d: %v: %s", n, err, r.Value)
		}
		if v.Customer != string(r.Key) || v.Tier == "" {
			t.Errorf("row %d: key %s, value %s", n, r.Key, r.Value)
		}
		rows[string(r.Key)] = true
	}
	if len(rows) != table.records {
		t.Errorf("%d rows, %d distinct keys", table.records, len(rows))
	}
	for k := range keys {
		if !rows[k] {
			t.Errorf("no row for the orders' customer %s", k)
		}
	}
}

// The http rows run the http transform against the run's lookup service
// at 1, 8 and 32 requests in flight under key ordering, each on its own
// input of httpRecords records in one partition; without the service
// they do not start.
func TestHTTPCommands(t *testing.T) {
	b := &broker{addrs: []string{"127.0.0.1:1"}}
	s := &runSpec{group: "g", in: &input{topic: "g-in"}, live: "g-in", out: "g-out", interval: 100 * time.Millisecond}
	for _, n := range []string{"1", "8", "32"} {
		sys, ok := systemByKey("http-" + n)
		i, _ := strconv.Atoi(n)
		if !ok || !sys.ownInput || !sys.onePartition || sys.records != httpRecords(i) || sys.records < 5000 {
			t.Fatalf("http-%s: not a row of its own single-partition input of %d records: %+v", n, httpRecords(i), sys)
		}
		if _, err := sys.cmd(&environment{processor: "/bin/processor"}, b, s, nil); err == nil {
			t.Errorf("http-%s starts without the lookup service", n)
		}
		c, err := sys.cmd(&environment{processor: "/bin/processor", lookup: "http://127.0.0.1:3"}, b, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range []string{"PROCESSOR_TRANSFORMS=http", `PROCESSOR_HTTP_URL="http://127.0.0.1:3/customers/\(.customer)"`,
			"PROCESSOR_HTTP_MAX_IN_FLIGHT=" + n, "PROCESSOR_ORDERING=key", "PROCESSOR_INPUT_TOPICS=g-in"} {
			if !slices.Contains(c.Env, kv) {
				t.Errorf("http-%s: the environment lacks %s: %v", n, kv, c.Env)
			}
		}
	}
}

// A row that drains an input of its own of another size (the http rows)
// is rated by that input's count, not by -records.
func TestRowsRateOwnInput(t *testing.T) {
	sys, _ := systemByKey("http-8")
	shared := &input{topic: "in", size: 100, records: 5000, bytes: 500_000}
	own := &input{topic: "own", size: 100, records: sys.records}
	rp := &report{o: options{sizes: []int{100}, intervals: []time.Duration{time.Second}, systems: []string{"http-8"}},
		env: &environment{avail: map[string]string{}}, inputs: map[int]*input{100: shared},
		results: []*result{{spec: &runSpec{sys: sys, in: own, interval: time.Second}, wall: 10 * time.Second, cpu: 4}}}
	rows := rp.rows()
	if len(rows) != 1 || rows[0].rate != float64(sys.records)/10 || rows[0].cpuM != 4/float64(sys.records)*1e6 {
		t.Errorf("rows %+v, want the rate and CPU of %d records in 10s", rows[0], sys.records)
	}
}
