package check

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// aggregated gives the fixture's inputs keys, k<offset%3> per input
// partition ("p0k1"), and its outputs the counts a correct count by key
// would emit: the output's key its source's, its count the number of the
// key's visible outputs so far in output order. Aborted outputs get the
// count their attempt would have had, which a read_committed reader never
// sees.
func (f *fixture) aggregated() (Run, *fixture) {
	keys := map[Input]string{}
	for _, in := range f.inputs {
		keys[in] = "p" + strconv.Itoa(int(in.Partition)) + "k" + strconv.Itoa(int(in.Offset%3))
	}
	slices.SortFunc(f.outputs, byPosition)
	counts := map[string]int64{}
	for i := range f.outputs {
		o := &f.outputs[i]
		o.Key, o.Keyed = keys[o.Source], true
		o.Count, o.CountOK, o.CountKey = counts[o.Key]+1, true, record.AppendKeyJSON(nil, []byte(o.Key))
		if o.Committed && !o.Aborted {
			counts[o.Key]++
		}
	}
	r := f.run()
	r.InputKeys = keys
	return r, f
}

// counted is strict with the aggregate check.
var counted = func() Options { o := strict; o.Aggregate = true; return o }()

// expectAll asserts the counts of every anomaly, the aggregate's
// included: want lists the non-zero ones.
func expectAll(t *testing.T, rep Report, want map[Anomaly]int) {
	t.Helper()
	for _, a := range slices.Concat(Anomalies, AggregateAnomalies) {
		if rep.Counts[a] != want[a] {
			t.Errorf("%s: got %d, want %d", a, rep.Counts[a], want[a])
		}
	}
	if got := rep.Clean(); got != (len(want) == 0) {
		t.Errorf("Clean() = %v with %v", got, rep.Counts)
	}
	if t.Failed() {
		t.Logf("report:\n%s%v", rep.Table(), rep.Examples)
	}
}

// outputOf returns the index in f.outputs of src's visible output.
func (f *fixture) outputOf(t *testing.T, src Input) int {
	t.Helper()
	for i, o := range f.outputs {
		if o.Source == src && o.Committed {
			return i
		}
	}
	t.Fatalf("no visible output of %s", src)
	return -1
}

func TestAggregateClean(t *testing.T) {
	// Two partitions of 10 inputs, six keys; an aborted first attempt at
	// in/0@0..4 whose counts (visible to nobody) are not judged.
	f := newFixture(10)
	f.write(0, false, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4))
	r, _ := f.identity().aggregated()
	rep := Check(r, counted)
	expectAll(t, rep, nil)
	if ag := rep.Aggregate; ag == nil || ag.Keys != 6 || ag.Final != 20 || ag.Max != 4 {
		t.Errorf("aggregate totals %+v, want 6 keys, 20 in all, the highest 4", rep.Aggregate)
	}
	table := rep.Table()
	var rows []string
	for _, line := range strings.Split(table, "\n") {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	for _, s := range []string{"count-repeat 0 -", "count-gap 0 -", "count-short 0 -", "count-excess 0 -", "count-value 0 -", "count-key 0 -",
		"aggregate counts 6 keys, last counts summing to 20, the highest 4", "result: CLEAN"} {
		if !slices.Contains(rows, s) {
			t.Errorf("table has no row %q:\n%s", s, table)
		}
	}
	// Without the check, no count rows.
	if table := Check(r, strict).Table(); strings.Contains(table, "count-") || strings.Contains(table, "aggregate counts") {
		t.Errorf("the table of a run without -check aggregate has count rows:\n%s", table)
	}
}

func TestAggregateAnomalies(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(t *testing.T, f *fixture, r *Run)
		want    map[Anomaly]int
		example map[Anomaly]string
	}{{
		// p0k0 (in/0@0, 3, 6, 9) counts 1, 2, 2, 3: the state went back
		// one count, and the key ends one short.
		name: "repeat",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			r.Outputs[f.outputOf(t, in(0, 6))].Count = 2
			r.Outputs[f.outputOf(t, in(0, 9))].Count = 3
		},
		want:    map[Anomaly]int{CountRepeat: 1, CountShort: 1},
		example: map[Anomaly]string{CountRepeat: `key "p0k0" counts 2 after 2 (at out/0@3)`, CountShort: `key "p0k0": last count 3, but 4 of its inputs were taken`},
	}, {
		// p0k1 (in/0@1, 4, 7) counts 1, 3, 4: a count the state kept
		// from an aborted transaction.
		name: "gap",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			r.Outputs[f.outputOf(t, in(0, 4))].Count = 3
			r.Outputs[f.outputOf(t, in(0, 7))].Count = 4
		},
		want:    map[Anomaly]int{CountGap: 1, CountExcess: 1},
		example: map[Anomaly]string{CountGap: `key "p0k1" counts 3 after 1 (at out/0@1): 1 counts missing`, CountExcess: `key "p0k1": last count 4, but only 3`},
	}, {
		// A key whose first visible count is 2.
		name: "gap at the start",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			for _, src := range []Input{in(1, 2), in(1, 5), in(1, 8)} {
				r.Outputs[f.outputOf(t, src)].Count++
			}
		},
		want:    map[Anomaly]int{CountGap: 1, CountExcess: 1},
		example: map[Anomaly]string{CountGap: `key "p1k2" counts 2 after 0: 1 counts missing`},
	}, {
		// in/1@7's output is missing: lost by lineage, and p1k1 ends
		// at 2 of 3.
		name: "short",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			i := f.outputOf(t, in(1, 7))
			r.Outputs = slices.Delete(r.Outputs, i, i+1)
		},
		want:    map[Anomaly]int{Lost: 1, CountShort: 1},
		example: map[Anomaly]string{CountShort: `key "p1k1": last count 2, but 3 of its inputs were taken`},
	}, {
		// in/0@8 counted twice, its counts 3 and 4 (p0k2: in/0@2, 5,
		// 8): the retried chain's double count, a duplicate by lineage
		// too. The counts run 1, 2, 3, 4 in output order: only the last
		// count against the inputs shows it.
		name: "excess",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			dup := r.Outputs[f.outputOf(t, in(0, 8))]
			dup.Offset, dup.Count = 100, 4
			r.Outputs = append(r.Outputs, dup)
		},
		want:    map[Anomaly]int{Duplicate: 1, CountExcess: 1},
		example: map[Anomaly]string{CountExcess: `key "p0k2": last count 4, but only 3 of its inputs were taken`},
	}, {
		// An output that is no count: its key's sequence is judged
		// without it, and ends short.
		name: "value",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			r.Outputs[f.outputOf(t, in(1, 9))].CountOK = false
		},
		want:    map[Anomaly]int{CountValue: 1, CountShort: 1},
		example: map[Anomaly]string{CountValue: "out/1@9 (from in/1@9) is not an aggregate count of a keyed record"},
	}, {
		// A count whose value names another key than its record key.
		name: "key names another",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			r.Outputs[f.outputOf(t, in(0, 3))].CountKey = []byte(`"p0k1"`)
		},
		want:    map[Anomaly]int{CountKey: 1},
		example: map[Anomaly]string{CountKey: `out/0@3 (from in/0@3): its value's key "p0k1" names another key than its record key "p0k0"`},
	}, {
		name: "key null",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			r.Outputs[f.outputOf(t, in(1, 2))].CountKey = []byte(`null`)
		},
		want:    map[Anomaly]int{CountKey: 1},
		example: map[Anomaly]string{CountKey: `out/1@2 (from in/1@2): its value's key null is not the rendering of a key`},
	}, {
		name: "key absent",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			r.Outputs[f.outputOf(t, in(1, 3))].CountKey = nil
		},
		want:    map[Anomaly]int{CountKey: 1},
		example: map[Anomaly]string{CountKey: `out/1@3 (from in/1@3): its value names no key; its record key is "p1k0"`},
	}, {
		// The base64 form of a key that is UTF-8 ("p0k2"), which
		// renders as a string: not its rendering.
		name: "key in another form",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			r.Outputs[f.outputOf(t, in(0, 2))].CountKey = []byte(`{"base64":"cDBrMg=="}`)
		},
		want:    map[Anomaly]int{CountKey: 1},
		example: map[Anomaly]string{CountKey: `its value's key {"base64":"cDBrMg=="} is not the rendering of a key`},
	}, {
		// An output keyed p1k9, its value naming p1k9, from in/1@9,
		// whose key is p1k0: the record key is not its input's; p1k9
		// starts at 4 with no input, p1k0 ends at 3 of 4.
		name: "record key not the input's",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			o := &r.Outputs[f.outputOf(t, in(1, 9))]
			o.Key, o.CountKey = "p1k9", []byte(`"p1k9"`)
		},
		want:    map[Anomaly]int{CountKey: 1, CountGap: 1, CountExcess: 1, CountShort: 1},
		example: map[Anomaly]string{CountKey: `out/1@9 (from in/1@9): its record key "p1k9" is not its input's "p1k0"`},
	}, {
		// A count visible although its transaction aborted: an
		// aborted read, and the key's counts are judged without it.
		name: "aborted read",
		corrupt: func(t *testing.T, f *fixture, r *Run) {
			o := r.Outputs[f.outputOf(t, in(0, 9))]
			o.Offset, o.Count, o.Aborted = 200, 5, true
			r.Outputs = append(r.Outputs, o)
		},
		want: map[Anomaly]int{AbortedRead: 1},
	}} {
		t.Run(c.name, func(t *testing.T) {
			r, f := newFixture(10).identity().aggregated()
			c.corrupt(t, f, &r)
			rep := Check(r, counted)
			expectAll(t, rep, c.want)
			expectDetails(t, rep, c.example, nil)
		})
	}
}

// The inputs a key's count leaves out: those dead-lettered (a notjson
// input jq failed before the aggregate), skipped by policy, and those not
// yet processed; a lost one is not left out.
func TestAggregateInputsTaken(t *testing.T) {
	// in/0@3 (p0k0) dead-lettered, in/1@4 (p1k1) skipped: both marked
	// notjson, neither has an output; p0k0 and p1k1 count one less.
	f := newFixture(10).allBut(in(0, 3), in(1, 4))
	r, _ := f.aggregated()
	r.Marks = map[Input]Mark{in(0, 3): {Class: NotJSON}, in(1, 4): {Class: NotJSON}}
	r.DeadLetters = []DeadLetterRecord{deadLetter(0, 0, in(0, 3), true, "jq: not JSON")}
	opts := counted
	opts.Skipping = true
	rep := Check(r, opts)
	expectAll(t, rep, nil)
	if ag := rep.Aggregate; ag == nil || ag.Final != 18 {
		t.Errorf("aggregate totals %+v, want 18 counted", rep.Aggregate)
	}

	// Without -poison-skip in/1@4 is lost, and p1k1 short.
	opts.Skipping = false
	expectAll(t, Check(r, opts), map[Anomaly]int{Lost: 1, CountShort: 1})

	// in/1@8 and 9 not processed yet (past the committed offset 8, no
	// output), the run not expected to be done: not counted.
	f = newFixture(10).allBut(in(1, 8), in(1, 9))
	f.committed[tp("in", 1)] = 8
	r, _ = f.aggregated()
	opts = counted
	opts.ExpectAll = false
	expectAll(t, Check(r, opts), nil)
}

// Keys that are not UTF-8 (Java's LongSerializer's 8 big-endian bytes)
// pass when each count names its key as {"base64": ...}; a count naming
// the key as JSON's U+FFFD string, or another key's base64, does not.
func TestAggregateBinaryKeys(t *testing.T) {
	f := newFixture(10)
	r, _ := f.identity().aggregated()
	long := func(i int64) string { return string(binary.BigEndian.AppendUint64(nil, uint64(i))) }
	for in := range r.InputKeys {
		r.InputKeys[in] = long(in.Offset%3 + 250*int64(in.Partition)) // 0..2 and 250..252: 250 is 0xfa, not UTF-8
	}
	for i := range r.Outputs {
		o := &r.Outputs[i]
		o.Key = r.InputKeys[o.Source]
		o.CountKey = record.AppendKeyJSON(nil, []byte(o.Key))
	}
	expectAll(t, Check(r, counted), nil)
	if !strings.Contains(string(r.Outputs[f.outputOf(t, in(1, 0))].CountKey), "base64") {
		t.Fatalf("the fixture's key of partition 1 renders as %s, not in base64", r.Outputs[f.outputOf(t, in(1, 0))].CountKey)
	}

	lossy, _ := json.Marshal(long(250))
	r.Outputs[f.outputOf(t, in(1, 0))].CountKey = lossy
	r.Outputs[f.outputOf(t, in(1, 1))].CountKey = record.AppendKeyJSON(nil, []byte(long(252)))
	rep := Check(r, counted)
	expectAll(t, rep, map[Anomaly]int{CountKey: 2})
	expectDetails(t, rep, map[Anomaly]string{CountKey: `out/1@0 (from in/1@0): its value's key "\u0000\u0000\u0000\u0000\u0000\u0000\u0000\ufffd" is not the rendering of a key`}, nil)
	if ex := rep.Examples[CountKey]; len(ex) != 2 || !strings.Contains(ex[1], `{"base64":"AAAAAAAAAPw="} names another key than its record key {"base64":"AAAAAAAAAPs="}`) {
		t.Errorf("count-key examples %q", ex)
	}
}

func TestParseCount(t *testing.T) {
	for _, c := range []struct {
		value string
		count int64
		ok    bool
	}{
		{`{"key":"k7","value":3}`, 3, true},
		{`{"key":7,"value":12}`, 12, true},
		{`{"value":3}`, 0, false},
		{`{"key":"k7","value":3.5}`, 0, false},
		{`{"key":"k7","value":3e2}`, 0, false},
		{`{"key":"k7","value":"3"}`, 0, false},
		{`{"key":"k7"}`, 0, false},
		{`{"key":"k7","value":3,"window_start":"2026-12-02T00:00:00Z","window_end":"2026-12-02T01:00:00Z"}`, 0, false},
		{`not JSON`, 0, false},
	} {
		count, ok := ParseCount([]byte(c.value))
		if count != c.count || ok != c.ok {
			t.Errorf("ParseCount(%s) = %d, %v; want %d, %v", c.value, count, ok, c.count, c.ok)
		}
	}
}

// Read with Source.Aggregate keeps the outputs' counts and the inputs'
// keys from a kfake cluster: a run written as a count by key reads clean,
// one with a count repeated reads with it, and one whose count names
// another key than its record's with a count-key.
func TestReadAggregate(t *testing.T) {
	e := newEnv(t)
	// counts sets each output's value to the count of its key so far,
	// in the order written (by partition, as Check reads them); "bump"
	// makes the key k4's third count a 2 again, "rename" makes it name
	// k5.
	counts := func(mode string) func([]*kgo.Record) []*kgo.Record {
		return func(recs []*kgo.Record) []*kgo.Record {
			slices.SortStableFunc(recs, func(a, b *kgo.Record) int { return int(a.Partition - b.Partition) })
			n := map[string]int{}
			for _, r := range recs {
				n[string(r.Key)]++
				c, named := n[string(r.Key)], string(r.Key)
				if string(r.Key) == "k4" && c == 3 {
					switch mode {
					case "bump":
						c = 2
					case "rename":
						named = "k5"
					}
				}
				r.Value = []byte(`{"key":"` + named + `","value":` + strconv.Itoa(c) + `}`)
			}
			return recs
		}
	}
	for _, c := range []struct {
		prefix string
		want   map[Anomaly]int
	}{{"clean-", nil}, {"bump-", map[Anomaly]int{CountRepeat: 1, CountShort: 1}}, {"rename-", map[Anomaly]int{CountKey: 1}}} {
		src := e.scenario(c.prefix, counts(strings.TrimSuffix(c.prefix, "-")))
		src.Aggregate = true
		r := e.read(src)
		if len(r.InputKeys) != len(r.Inputs) || r.InputKeys[Input{c.prefix + "in", 1, 4}] != "k4" {
			t.Fatalf("%s: input keys %v of %d inputs", c.prefix, r.InputKeys, len(r.Inputs))
		}
		rep := Check(r, counted)
		expectAll(t, rep, c.want)
		if ag := rep.Aggregate; ag == nil || ag.Keys != 10 {
			t.Errorf("%s: aggregate totals %+v, want 10 keys", c.prefix, rep.Aggregate)
		}
	}
}
