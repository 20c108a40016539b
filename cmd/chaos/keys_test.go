package main

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// The binary keys are 1,000 distinct byte strings of Java's
// LongSerializer and IntegerSerializer, most of them not UTF-8, and they
// are the keys that merged when a store key was the record key's JSON
// string (every invalid byte U+FFFD): far fewer than 1,000 such strings.
func TestBinaryKeys(t *testing.T) {
	seen := map[string]bool{}
	legacy := map[string]bool{}
	invalid := 0
	for j := range keySpace {
		k := binaryKey(j)
		if seen[string(k)] {
			t.Fatalf("key %d (%s, % x) repeats an earlier one", j, binaryLabel(j), k)
		}
		seen[string(k)] = true
		if !utf8.Valid(k) {
			invalid++
		}
		js, err := json.Marshal(string(k))
		if err != nil {
			t.Fatal(err)
		}
		legacy[string(js)] = true
	}
	if invalid < keySpace*7/10 {
		t.Errorf("%d of %d keys are not UTF-8, want most", invalid, keySpace)
	}
	if len(legacy) > keySpace/2 {
		t.Errorf("the keys make %d distinct JSON strings, want them to collide (at most %d)", len(legacy), keySpace/2)
	}
	t.Logf("%d keys, %d not UTF-8, %d distinct as JSON strings", keySpace, invalid, len(legacy))
	// The serializers' bytes: LongSerializer 8 bytes, IntegerSerializer 4,
	// big-endian two's complement.
	for _, c := range []struct {
		j     int
		label string
		want  []byte
	}{
		{0, "long:0", make([]byte, 8)},
		{1, "int:1", []byte{0, 0, 0, 1}},
		{2, "long:-2", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}},
		{3, "int:-3", []byte{0xff, 0xff, 0xff, 0xfd}},
		{500, "long:500", binary.BigEndian.AppendUint64(nil, 500)},
		{129, "int:129", []byte{0, 0, 0, 0x81}},
	} {
		if got := binaryKey(c.j); !slices.Equal(got, c.want) || binaryLabel(c.j) != c.label {
			t.Errorf("key %d = % x (%s), want % x (%s)", c.j, got, binaryLabel(c.j), c.want, c.label)
		}
	}
}

// An orders input's value, ordinary or marked, gets its customer first;
// a value that is no JSON object stays as it is.
func TestWithCustomer(t *testing.T) {
	o := options{keys: keysOrders, customers: 3}
	for _, c := range []struct {
		in   string
		i    int
		want string
	}{
		{`{"key":"o7","seq":7}`, 7, `{"customer":"c1","key":"o7","seq":7}`},
		{`{}`, 5, `{"customer":"c2"}`},
		{`{"key":"poison-notjson-9","seq":9,"cut":`, 9, `{"customer":"c0","key":"poison-notjson-9","seq":9,"cut":`},
		{`not JSON: poison-notjson-9`, 9, `not JSON: poison-notjson-9`},
	} {
		if got := string(o.withCustomer([]byte(c.in), c.i)); got != c.want {
			t.Errorf("withCustomer(%s, %d) = %s, want %s", c.in, c.i, got, c.want)
		}
	}
	// eoscheck finds the customer where the drill put it.
	v, _ := json.Marshal(inputValue{Key: "o4", Seq: 4})
	if key, ok := check.GroupPath([]string{"customer"}).Key(o.withCustomer(v, 4)); !ok || key != "c1" {
		t.Errorf("the group of order 4 is %q, %v; want c1", key, ok)
	}
	if got := string((options{keys: keysText}).withCustomer(v, 4)); got != string(v) {
		t.Errorf("text keys: %s", got)
	}
}

// The grouped chain counts by customer, and -env settings come last, so
// that they win over the drill's own.
func TestInstanceEnvironmentGrouped(t *testing.T) {
	d := &driver{
		o: options{sessionTimeout: 6 * time.Second, txnTimeout: 5 * time.Second, transforms: []string{"jq", "aggregate"},
			jqExpr: ".seen = true", policies: []string{"skip"}, guarantee: "exactly_once", sink: "kafka", stateDir: "/tmp/s",
			keys: keysOrders, customers: 8, env: envList{"PROCESSOR_AGGREGATE_PARTITIONED_BY_KEY=false", "PROCESSOR_WORKERS=1"}},
		brokers: []string{"127.0.0.1:1"}, group: "chaos-x", in: "chaos-in-x", out: "chaos-out-x",
	}
	env := d.instance(1).Env()
	if !slices.Contains(env, "PROCESSOR_AGGREGATE_BY=.customer") {
		t.Errorf("no PROCESSOR_AGGREGATE_BY=.customer in %v", env)
	}
	if !slices.Equal(env[len(env)-2:], d.o.env) {
		t.Errorf("the -env settings are not last: %v", env)
	}
	if args := d.eoscheckArgs(); !slices.Contains(args, "-group-by") || args[slices.Index(args, "-group-by")+1] != ".customer" {
		t.Errorf("eoscheck arguments %v, want -group-by .customer", args)
	}
	d.o.keys = keysBinary
	if env := d.instance(1).Env(); slices.ContainsFunc(env, func(kv string) bool { return len(kv) > 22 && kv[:22] == "PROCESSOR_AGGREGATE_BY" }) {
		t.Errorf("binary keys are counted by record key, but %v", env)
	}
	if args := d.eoscheckArgs(); slices.Contains(args, "-group-by") {
		t.Errorf("binary keys: eoscheck arguments %v", args)
	}
}
