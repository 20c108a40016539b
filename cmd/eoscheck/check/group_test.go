package check

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// byCustomer is the group path of the grouped fixtures.
var byCustomer = GroupPath{"customer"}

// grouped is counted with the grouped aggregate check.
var grouped = func() Options { o := counted; o.GroupBy = byCustomer; return o }()

// customerOf is the fixture's group of an input: c<offset%3>, so that
// every customer has inputs in both input partitions.
func customerOf(in Input) string { return "c" + strconv.Itoa(int(in.Offset%3)) }

// groupedRun is a count by customer over the two input partitions of
// newFixture(10), as a processor with a repartition hop emits it: the
// inputs of the two partitions interleaved (in/0@0, in/1@0, in/0@1,
// ...), each output keyed by its input's customer in that customer's
// output partition (c1 in out/1, the others in out/0), its value
// {"key": "<customer>", "value": N}, one committed transaction each.
// under maps an input to the customer its count is made under (its own
// when absent); perPartition counts per input partition and customer,
// as a processor without the hop does.
func groupedRun(under map[Input]string, perPartition bool) Run {
	f := newFixture(10)
	keys := map[Input]string{}
	for _, in := range f.inputs {
		keys[in] = customerOf(in)
	}
	counts := map[string]int64{}
	next := map[int32]int64{}
	for o := int64(0); o < 10; o++ {
		for p := int32(0); p < 2; p++ {
			src := Input{"in", p, o}
			c, ok := under[src]
			if !ok {
				c = keys[src]
			}
			part := int32(0)
			if c == "c1" {
				part = 1
			}
			counter := c
			if perPartition {
				counter = strconv.Itoa(int(p)) + "/" + c
			}
			counts[counter]++
			f.outputs = append(f.outputs, Output{Topic: "out", Partition: part, Offset: next[part], Source: src,
				Key: c, Keyed: true, Count: counts[counter], CountOK: true, CountKey: []byte(strconv.Quote(c)),
				Committed: true, TxnEnd: next[part] + 1})
			next[part] += 2
		}
	}
	r := f.run()
	r.InputKeys = keys
	return r
}

// recount gives r's outputs the counts of their keys in output order.
func recount(r Run) {
	slices.SortFunc(r.Outputs, byPosition)
	counts := map[string]int64{}
	for i := range r.Outputs {
		counts[r.Outputs[i].Key]++
		r.Outputs[i].Count = counts[r.Outputs[i].Key]
	}
}

// outputFrom returns the index in r.Outputs of src's first output.
func outputFrom(t *testing.T, r Run, src Input) int {
	t.Helper()
	i := slices.IndexFunc(r.Outputs, func(o Output) bool { return o.Source == src })
	if i < 0 {
		t.Fatalf("no output of %s", src)
	}
	return i
}

func TestGroupedClean(t *testing.T) {
	rep := Check(groupedRun(nil, false), grouped)
	expectAll(t, rep, nil)
	// c0: offsets 0, 3, 6, 9 of both partitions; c1 and c2 three each.
	if ag := rep.Aggregate; ag == nil || ag.Keys != 3 || ag.Final != 20 || ag.Max != 8 || ag.GroupBy != ".customer" {
		t.Errorf("aggregate totals %+v, want 3 groups by .customer, 20 in all, the highest 8", rep.Aggregate)
	}
	if table := rep.Table(); !strings.Contains(table, "3 groups by .customer, last counts summing to 20, the highest 8") {
		t.Errorf("table:\n%s", table)
	}
	// The same run judged by record key: every count names its
	// customer, not its input's record key.
	r := groupedRun(nil, false)
	for in := range r.InputKeys {
		r.InputKeys[in] = "o" + in.String()
	}
	if rep := Check(r, counted); rep.Counts[CountKey] != 20 {
		t.Errorf("by record key: %d count-key anomalies, want 20", rep.Counts[CountKey])
	}
}

func TestGroupedAnomalies(t *testing.T) {
	for _, c := range []struct {
		name    string
		run     func(t *testing.T) Run
		want    map[Anomaly]int
		example map[Anomaly]string
	}{{
		// The bug of a count by a field without the repartition hop:
		// one count per (input partition, customer). Each customer's
		// counts run 1, 1, 2, 2, ... and end at half its inputs.
		name: "per partition",
		run:  func(*testing.T) Run { return groupedRun(nil, true) },
		want: map[Anomaly]int{CountRepeat: 10, CountShort: 3},
		example: map[Anomaly]string{
			CountRepeat: `key "c0" counts 1 after 1 (at out/0@0)`,
			CountShort:  `key "c0": last count 4, but 8 of its inputs were taken`,
		},
	}, {
		// in/1@9 (c0) counted twice, its second count 9 visible too.
		name: "duplicate",
		run: func(t *testing.T) Run {
			r := groupedRun(nil, false)
			dup := r.Outputs[outputFrom(t, r, Input{"in", 1, 9})]
			dup.Offset, dup.Count, dup.TxnEnd = 100, 9, 101
			r.Outputs = append(r.Outputs, dup)
			return r
		},
		want:    map[Anomaly]int{Duplicate: 1, CountExcess: 1},
		example: map[Anomaly]string{CountExcess: `key "c0": last count 9, but only 8 of its inputs were taken`},
	}, {
		// c2's counts jump from 2 to 4 at in/0@5 (a count the state
		// kept from an aborted transaction) and go on from there.
		name: "gap",
		run: func(t *testing.T) Run {
			r := groupedRun(nil, false)
			for _, src := range []Input{{"in", 0, 5}, {"in", 1, 5}, {"in", 0, 8}, {"in", 1, 8}} {
				r.Outputs[outputFrom(t, r, src)].Count++
			}
			return r
		},
		want:    map[Anomaly]int{CountGap: 1, CountExcess: 1},
		example: map[Anomaly]string{CountGap: `key "c2" counts 4 after 2 (at out/0@6): 1 counts missing`},
	}, {
		// in/0@4 (c1) missing: lost, and c1 ends short.
		name: "missing",
		run: func(t *testing.T) Run {
			r := groupedRun(nil, false)
			i := outputFrom(t, r, Input{"in", 0, 4})
			r.Outputs = slices.Delete(r.Outputs, i, i+1)
			for _, src := range []Input{{"in", 1, 4}, {"in", 0, 7}, {"in", 1, 7}} {
				r.Outputs[outputFrom(t, r, src)].Count--
			}
			return r
		},
		want:    map[Anomaly]int{Lost: 1, CountShort: 1},
		example: map[Anomaly]string{CountShort: `key "c1": last count 5, but 6 of its inputs were taken`},
	}, {
		// in/0@4, a c1 order, counted under c2 (keyed and named c2,
		// the counts of both customers consistent): c2 ends one
		// above its inputs, c1 one below.
		name: "wrong customer",
		run:  func(*testing.T) Run { return groupedRun(map[Input]string{{"in", 0, 4}: "c2"}, false) },
		want: map[Anomaly]int{CountKey: 1, CountExcess: 1, CountShort: 1},
		example: map[Anomaly]string{
			CountKey:    `out/0@12 (from in/0@4): counted under "c2", but its input's .customer is "c1"`,
			CountExcess: `key "c2": last count 7, but only 6 of its inputs were taken`,
			CountShort:  `key "c1": last count 5, but 6 of its inputs were taken`,
		},
	}, {
		// A count whose value names another customer than its record
		// key.
		name: "value names another",
		run: func(t *testing.T) Run {
			r := groupedRun(nil, false)
			r.Outputs[outputFrom(t, r, Input{"in", 1, 3})].CountKey = []byte(`"c1"`)
			return r
		},
		want:    map[Anomaly]int{CountKey: 1},
		example: map[Anomaly]string{CountKey: `its value's key "c1" names another group than its record key "c0"`},
	}, {
		name: "value names null",
		run: func(t *testing.T) Run {
			r := groupedRun(nil, false)
			r.Outputs[outputFrom(t, r, Input{"in", 1, 3})].CountKey = []byte(`null`)
			return r
		},
		want:    map[Anomaly]int{CountKey: 1},
		example: map[Anomaly]string{CountKey: `its value's key null is not a group value; its record key is "c0"`},
	}, {
		// An output counting an input whose value has no customer,
		// which the processor must fail.
		name: "input without a group",
		run: func(t *testing.T) Run {
			r := groupedRun(nil, false)
			delete(r.InputKeys, Input{"in", 1, 9})
			return r
		},
		want:    map[Anomaly]int{CountKey: 1, CountExcess: 1},
		example: map[Anomaly]string{CountKey: `out/0@26 (from in/1@9): counted under "c0", but its input has no .customer (the processor must fail it)`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			rep := Check(c.run(t), grouped)
			expectAll(t, rep, c.want)
			expectDetails(t, rep, c.example, nil)
		})
	}
}

// Through a repartition hop an input partition's records keep their
// order within each group only: two customers' counts of in/0 in one
// output partition out of input order are no anomaly, one customer's
// are a key-order.
func TestGroupedOrder(t *testing.T) {
	r := groupedRun(nil, false)
	// out/0 holds c0 and c2; swap the positions of in/0@2 (c2's first)
	// and in/0@3 (c0's second): c0's and c2's counts still run in order.
	i, j := outputFrom(t, r, Input{"in", 0, 2}), outputFrom(t, r, Input{"in", 0, 3})
	r.Outputs[i].Offset, r.Outputs[j].Offset = r.Outputs[j].Offset, r.Outputs[i].Offset
	r.Outputs[i].TxnEnd, r.Outputs[j].TxnEnd = r.Outputs[j].TxnEnd, r.Outputs[i].TxnEnd
	recount(r)
	expectAll(t, Check(r, grouped), nil)
	if rep := Check(r, counted); rep.Counts[Order] != 1 {
		t.Errorf("by record key the same run has %d order anomalies, want 1", rep.Counts[Order])
	}

	// in/0@0 and in/0@3, both c0, swapped: c0 counts 2 before 1 as
	// well.
	r = groupedRun(nil, false)
	i, j = outputFrom(t, r, Input{"in", 0, 0}), outputFrom(t, r, Input{"in", 0, 3})
	r.Outputs[i].Source, r.Outputs[j].Source = r.Outputs[j].Source, r.Outputs[i].Source
	rep := Check(r, grouped)
	expectAll(t, rep, map[Anomaly]int{KeyOrder: 1})
}

func TestGroupPath(t *testing.T) {
	for _, c := range []struct {
		expr, value, key string
		ok               bool
	}{
		{".customer", `{"customer":"c1","order":"o7"}`, "c1", true},
		{".customer", `{"customer":"caf\u00e9 \"x\""}`, `café "x"`, true},
		{".customer", `{"customer":42}`, "42", true},
		{".customer", `{"customer": {"id": 1, "tier": "b"}}`, `{"id":1,"tier":"b"}`, true},
		{".customer", `{"customer":null}`, "", false},
		{".customer", `{"order":"o7"}`, "", false},
		{".customer", `not JSON`, "", false},
		{".customer", `["customer"]`, "", false},
		{".customer", `null`, "", false},
		{".order.customer", `{"order":{"customer":"c2"}}`, "c2", true},
		{".order.customer", `{"order":"c2"}`, "", false},
		{".c_2", `{"c_2":"x"}`, "x", true},
	} {
		p, err := ParseGroupPath(c.expr)
		if err != nil {
			t.Fatalf("ParseGroupPath(%q): %v", c.expr, err)
		}
		if p.String() != c.expr {
			t.Errorf("ParseGroupPath(%q).String() = %q", c.expr, p)
		}
		key, ok := p.Key([]byte(c.value))
		if key != c.key || ok != c.ok {
			t.Errorf("%s of %s = %q, %v; want %q, %v", c.expr, c.value, key, ok, c.key, c.ok)
		}
	}
	for _, bad := range []string{"customer", ".", "..customer", ".customer.", ".customer | ascii", ".2x", `."customer"`, ".a-b", ".customer[0]"} {
		if _, err := ParseGroupPath(bad); err == nil {
			t.Errorf("ParseGroupPath(%q) accepted", bad)
		}
	}
	if p, err := ParseGroupPath(""); err != nil || p != nil {
		t.Errorf(`ParseGroupPath("") = %v, %v; want the record key (nil)`, p, err)
	}
}

// Read with Source.GroupBy takes each input's group from its value on a
// kfake cluster: orders keyed by order id in two partitions, one without
// a customer and one not JSON; the counts by customer read clean, the
// same counts kept per input partition with count-repeat and
// count-short.
func TestReadGrouped(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		prefix       string
		perPartition bool
		want         map[Anomaly]int
	}{{"grouped-", false, nil}, {"perpart-", true, map[Anomaly]int{CountRepeat: 3, CountShort: 3}}} {
		in, out := c.prefix+"in", c.prefix+"out"
		e.createTopics(2, in, out)
		plain := e.client()
		proc := e.client(kgo.TransactionalID(c.prefix + "processor"))
		var outs []*kgo.Record
		counts := map[string]int{}
		for p := range int32(2) {
			for i := range 10 {
				value := `{"order":"o` + strconv.Itoa(i) + `","customer":"c` + strconv.Itoa(i%3) + `"}`
				switch {
				case p == 1 && i == 8:
					value = `{"order":"o8"}`
				case p == 1 && i == 9:
					value = `not JSON`
				}
				e.produce(plain, &kgo.Record{Topic: in, Partition: p, Key: []byte("o" + strconv.Itoa(int(p)) + "-" + strconv.Itoa(i)), Value: []byte(value)})
				if p == 1 && i >= 8 {
					continue // failed by the processor: no output
				}
				cust := "c" + strconv.Itoa(i%3)
				counter := cust
				if c.perPartition {
					counter = strconv.Itoa(int(p)) + "/" + cust
				}
				counts[counter]++
				o := outputRec(out, 0, Input{in, p, int64(i)})
				o.Key, o.Value = []byte(cust), []byte(`{"key":"`+cust+`","value":`+strconv.Itoa(counts[counter])+`}`)
				outs = append(outs, o)
			}
		}
		e.txn(proc, true, outs...)
		offs := kadm.Offsets{}
		offs.AddOffset(in, 0, 10, -1)
		offs.AddOffset(in, 1, 10, -1)
		if err := e.adm.CommitAllOffsets(ctxT(t), c.prefix+"group", offs); err != nil {
			t.Fatal(err)
		}
		r := e.read(Source{Brokers: e.brokers, Inputs: []string{in}, Outputs: []string{out}, Group: c.prefix + "group", Aggregate: true, GroupBy: byCustomer})
		if len(r.InputKeys) != 18 || r.InputKeys[Input{in, 1, 4}] != "c1" {
			t.Fatalf("%s: input groups %v, want 18 (none for the order without a customer and the one not JSON)", c.prefix, r.InputKeys)
		}
		// The two failed inputs are lost by lineage (no dead letter in
		// this hand-made run); their groups are not counted.
		want := map[Anomaly]int{Lost: 2}
		for a, n := range c.want {
			want[a] = n
		}
		rep := Check(r, grouped)
		expectAll(t, rep, want)
		if ag := rep.Aggregate; ag == nil || ag.Keys != 3 {
			t.Errorf("%s: aggregate totals %+v, want 3 groups", c.prefix, rep.Aggregate)
		}
	}
}
