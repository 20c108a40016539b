package join

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/itest"
)

// joinRig is an orders topic, a customers table topic and the output of
// a join chain, with what the table held when each order was written:
// the reference every output is judged by.
type joinRig struct {
	tg                *itest.Target
	in, table, out    string
	group             string
	mode, typ         string
	customers, orders int
	// rowAt[i] is the row order i must carry ("" for none): the table
	// as it stood, applied by the processor, before the order was
	// written.
	rowAt map[int]string
	rows  map[string]string // the table's committed rows now
}

// writeTable writes kv (a "" value is a tombstone) to the table in one
// transaction, committed or aborted, keyed and partitioned as the orders
// are (the default partitioner).
func (r *joinRig) writeTable(t *testing.T, kv map[string]string, commit bool) {
	t.Helper()
	cl, err := kgo.NewClient(r.tg.ClientOpts(kgo.TransactionalID(itest.Unique("table-writer")))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := itest.Context(t, itest.ProduceTimeout)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for k, v := range kv {
		rec := &kgo.Record{Topic: r.table, Key: []byte(k)}
		if v != "" {
			rec.Value = []byte(v)
		}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
	for k, v := range kv {
		if !commit {
			continue
		}
		if v == "" {
			delete(r.rows, k)
		} else {
			r.rows[k] = v
		}
	}
}

// churn changes the table while the processor runs: version 2 of the
// rows of c0 to c<updated-1> and tombstones for c<updated> to
// c<deleted-1>, in one committed transaction, then an aborted one that
// would change the rows of aborted.
func (r *joinRig) churn(t *testing.T, updated, deleted int, aborted ...string) {
	t.Helper()
	upd := map[string]string{}
	for i := range updated {
		upd["c"+strconv.Itoa(i)] = fmt.Sprintf(`{"name":"n%d","v":2}`, i)
	}
	for i := updated; i < deleted; i++ {
		upd["c"+strconv.Itoa(i)] = ""
	}
	r.writeTable(t, upd, true)
	ab := map[string]string{}
	for _, k := range aborted {
		ab[k] = `{"v":"aborted"}`
	}
	r.writeTable(t, ab, false)
}

// produceOrders writes orders from to to-1, order i of customer c<i%customers+5>
// (the last five have no row ever), and notes the row each must carry.
func (r *joinRig) produceOrders(t *testing.T, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		c := "c" + strconv.Itoa(i%(r.customers+5))
		recs = append(recs, &kgo.Record{Topic: r.in, Key: []byte(c), Value: fmt.Appendf(nil, `{"order":%d,"customer":%q}`, i, c)})
		r.rowAt[i] = r.rows[c]
	}
	r.tg.ProduceSync(t, recs)
	r.orders = max(r.orders, to)
}

// tableCurrent waits until the processor at addr has applied the table
// up to its end offsets (a tail that is a transaction marker included).
func (r *joinRig) tableCurrent(t *testing.T, addr string, partitions int) {
	t.Helper()
	ends := r.tg.EndOffsets(t, r.table)
	var last string
	itest.WaitFor(t, 60*time.Second, "the table applied to its end", func() bool {
		st := tableStatus(addr)
		if st == nil {
			return false
		}
		last = fmt.Sprintf("%+v, ends %v", *st, ends)
		n := 0
		for _, p := range st.Partitions {
			if p.Position >= ends[p.Partition] {
				n++
			}
		}
		return st.Ready && n == partitions
	})
	t.Logf("table status: %s", last)
}

// joinStatus is a table's part of /status.
type joinStatus struct {
	Ready      bool  `json:"ready"`
	Keys       int64 `json:"keys"`
	Misses     int64 `json:"misses"`
	Partitions []struct {
		Partition int32 `json:"partition"`
		Position  int64 `json:"position"`
		Rebuilt   bool  `json:"rebuilt"`
		Restored  int64 `json:"restored_rows"`
	} `json:"partitions"`
}

// tableStatus is the first table of /status at addr, nil when it has
// none yet.
func tableStatus(addr string) *joinStatus {
	_, body := itest.HTTPGet(addr, "/status")
	var doc struct {
		Tables []joinStatus `json:"tables"`
	}
	if json.Unmarshal([]byte(body), &doc) != nil || len(doc.Tables) == 0 {
		return nil
	}
	return &doc.Tables[0]
}

// check judges the committed output: every order that must carry a row
// is written exactly once, with that row; an order without one is
// written once with a null row (left) or not at all (inner).
func (r *joinRig) check(t *testing.T) {
	t.Helper()
	seen := map[int]int{}
	for _, rec := range r.tg.ReadAll(t, r.out, true) {
		var v struct {
			Order    int             `json:"order"`
			Customer string          `json:"customer"`
			Row      json.RawMessage `json:"row"`
		}
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatalf("output %s: %v", rec.Value, err)
		}
		seen[v.Order]++
		want := r.rowAt[v.Order]
		if want == "" {
			want = "null"
		}
		if string(v.Row) != want {
			t.Errorf("order %d (%s): row %s, want %s", v.Order, v.Customer, v.Row, want)
		}
	}
	for i := range r.orders {
		want := 1
		if r.rowAt[i] == "" && r.typ == "inner" {
			want = 0
		}
		if seen[i] != want {
			t.Errorf("order %d (row %q): %d outputs, want %d", i, r.rowAt[i], seen[i], want)
		}
	}
}

// joinSet runs the join chain with its table in dir, injected aborts and
// two workers, serving HTTP on addr.
func (r *joinRig) joinSet(dir, addr string) func(*launch.Instance) {
	return func(inst *launch.Instance) {
		inst.Transforms, inst.Workers, inst.HTTPAddr = []string{"join"}, 2, addr
		inst.CommitInterval = 100 * time.Millisecond
		inst.Settings = map[string]string{"PROCESSOR_JOIN_TABLE": r.table, "PROCESSOR_JOIN_INTO": ".row",
			"PROCESSOR_JOIN_TYPE": r.typ, "PROCESSOR_JOIN_MODE": r.mode}
		inst.Extra = append(inst.Extra, "PROCESSOR_STATE_DIR="+dir, "PROCESSOR_TEST_ABORT_RATE=0.2")
	}
}

// A join writes every order exactly once with the row its customer had
// in the table when the order was processed: through table updates,
// tombstones and an aborted table transaction while it runs, a SIGKILL,
// a SIGTERM (after which nothing is read again) and a wiped state
// directory (rebuilt from the table topic); co-partitioned and global,
// inner and left.
func TestJoinExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, typ string }{{"co_partitioned", "inner"}, {"global", "left"}} {
		t.Run(c.mode+"-"+c.typ, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				r := &joinRig{tg: tg, in: itest.Unique("orders"), table: itest.Unique("customers"), out: itest.Unique("enriched"),
					group: itest.Unique("join-group"), mode: c.mode, typ: c.typ, customers: 20, rowAt: map[int]string{}, rows: map[string]string{}}
				tableParts := 4
				if c.mode == "global" {
					tableParts = 3 // a global table needs no partition count of the input's
				}
				tg.NewTopics(t, 4, r.in, r.out)
				tg.CreateTopicWithConfigs(t, int32(tableParts), map[string]string{"cleanup.policy": "compact"}, r.table)
				v1 := map[string]string{}
				for i := range r.customers {
					v1["c"+strconv.Itoa(i)] = fmt.Sprintf(`{"name":"n%d","v":1}`, i)
				}
				r.writeTable(t, v1, true)
				dir, addr := t.TempDir(), itest.FreeAddr(t)
				set, static := r.joinSet(dir, addr), func(inst *launch.Instance) { inst.InstanceID = r.group + "-1" }
				p1 := tg.StartBinary(t, r.group, r.group+"-1", r.in, r.out, set, static)
				r.tableCurrent(t, addr, tableParts)
				r.produceOrders(t, 0, 300)
				tg.WaitCaughtUp(t, r.group, r.in)

				r.churn(t, 10, 15, "c1", "c12")
				r.tableCurrent(t, addr, tableParts)
				r.produceOrders(t, 300, 450)
				time.Sleep(300 * time.Millisecond)
				p1.Kill(t)

				p2 := tg.StartBinary(t, r.group, r.group+"-1", r.in, r.out, set, static)
				r.produceOrders(t, 450, 600)
				tg.WaitCaughtUp(t, r.group, r.in)
				r.tableCurrent(t, addr, tableParts)
				p2.Terminate(t)

				p3 := tg.StartBinary(t, r.group, r.group+"-1", r.in, r.out, set, static)
				r.tableCurrent(t, addr, tableParts)
				st := tableStatus(addr)
				for _, p := range st.Partitions {
					if p.Restored != 0 || p.Rebuilt {
						t.Errorf("after a SIGTERM the restore read %d rows of partition %d (rebuilt %v), want none", p.Restored, p.Partition, p.Rebuilt)
					}
				}
				r.produceOrders(t, 600, 650)
				tg.WaitCaughtUp(t, r.group, r.in)
				p3.Terminate(t)

				wiped := r.joinSet(t.TempDir(), addr)
				p4 := tg.StartBinary(t, r.group, r.group+"-1", r.in, r.out, wiped, static)
				r.tableCurrent(t, addr, tableParts)
				if st := tableStatus(addr); st.Keys != int64(len(r.rows)) || !st.Partitions[0].Rebuilt {
					t.Errorf("a wiped directory: %+v, want rebuilt with %d keys", st, len(r.rows))
				}
				r.produceOrders(t, 650, 700)
				tg.WaitCaughtUp(t, r.group, r.in)
				_, metrics := itest.HTTPGet(addr, "/metrics")
				if !strings.Contains(metrics, `processor_join_misses_total{table="`+r.table+`"}`) {
					t.Errorf("/metrics has no processor_join_misses_total of the table")
				}
				p4.Terminate(t)
				r.check(t)
				rep := tg.AuditWith(t, check.Source{Inputs: []string{r.in}, Outputs: []string{r.out}, Group: r.group,
					Join: true, JoinTable: r.table, JoinInto: check.GroupPath{"row"}},
					check.Options{ExpectAll: true, OneToOne: c.typ == "left", Join: &check.Join{Left: c.typ == "left"}})
				if rep.Join == nil || rep.Join.Joined == 0 || rep.Join.Misses == 0 {
					t.Errorf("eoscheck -check join judged %+v, want joined inputs and misses", rep.Join)
				}
			})
		})
	}
}

// Two instances share the orders' partitions, each keeping the table's
// partitions of its own; when one is killed the other takes its
// partitions over with their table partitions, and every order is
// written once with its row.
func TestJoinRebalance(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		r := &joinRig{tg: tg, in: itest.Unique("orders"), table: itest.Unique("customers"), out: itest.Unique("enriched"),
			group: itest.Unique("join-group"), mode: "co_partitioned", typ: "left", customers: 30, rowAt: map[int]string{}, rows: map[string]string{}}
		tg.NewTopics(t, 4, r.in, r.out)
		tg.CreateTopicWithConfigs(t, 4, map[string]string{"cleanup.policy": "compact"}, r.table)
		rows := map[string]string{}
		for i := range r.customers {
			rows["c"+strconv.Itoa(i)] = fmt.Sprintf(`{"name":"n%d"}`, i)
		}
		r.writeTable(t, rows, true)
		a1, a2 := itest.FreeAddr(t), itest.FreeAddr(t)
		p1 := tg.StartBinary(t, r.group, r.group+"-1", r.in, r.out, r.joinSet(t.TempDir(), a1))
		p2 := tg.StartBinary(t, r.group, r.group+"-2", r.in, r.out, r.joinSet(t.TempDir(), a2))
		r.produceOrders(t, 0, 400)
		tg.WaitCaughtUp(t, r.group, r.in)
		s1, s2 := tableStatus(a1), tableStatus(a2)
		if s1 == nil || s2 == nil || len(s1.Partitions)+len(s2.Partitions) != 4 {
			t.Errorf("two instances keep %v and %v table partitions, want the 4 split between them", s1, s2)
		}
		p1.Kill(t)
		r.produceOrders(t, 400, 800)
		tg.WaitCaughtUp(t, r.group, r.in)
		if s := tableStatus(a2); s == nil || len(s.Partitions) != 4 {
			t.Errorf("the instance left keeps %v, want all 4 table partitions", s)
		}
		p2.Terminate(t)
		r.check(t)
	})
}

// A co-partitioned table whose partition count is not the input's is
// refused at start: exit 2 and one line naming both; a table topic that
// does not exist too.
func TestJoinRefused(t *testing.T) {
	t.Parallel()
	tg := itest.NewFake(t)
	in, table, out := itest.Unique("orders"), itest.Unique("customers"), itest.Unique("enriched")
	tg.NewTopics(t, 4, in, out)
	tg.NewTopics(t, 3, table)
	for _, c := range []struct{ table, want string }{
		{table, "table " + table + " has 3 partitions and input topic " + in + " has 4"},
		{"missing-" + table, "PROCESSOR_JOIN_TABLE=\"missing-" + table + "\""},
	} {
		p := tg.StartBinary(t, itest.Unique("g"), itest.Unique("g"), in, out, func(inst *launch.Instance) {
			inst.Transforms = []string{"join"}
			inst.Settings = map[string]string{"PROCESSOR_JOIN_TABLE": c.table, "PROCESSOR_JOIN_INTO": ".row"}
			inst.Extra = append(inst.Extra, "PROCESSOR_STATE_DIR="+t.TempDir())
		})
		select {
		case <-p.Done:
		case <-time.After(60 * time.Second):
			t.Fatal("no exit within 60s")
		}
		var ee *exec.ExitError
		logs := strings.TrimSpace(p.Logs.String())
		last := logs[strings.LastIndex(logs, "\n")+1:]
		if !errors.As(p.Err, &ee) || ee.ExitCode() != 2 || !strings.Contains(last, c.want) || !strings.HasPrefix(last, "processor: configuration error:") {
			t.Errorf("exit %v, last line %q, want exit 2 and a line with %q", p.Err, last, c.want)
		}
	}
}
