package join

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/itest"
	"github.com/streamproc/processor/internal/testkit/wasmtest"
)

// enrichJoinModule builds the enrichjoin example plugin reading table.
func enrichJoinModule(t *testing.T, table string) string {
	t.Helper()
	module := filepath.Join(t.TempDir(), "enrichjoin.wasm")
	if err := wasmtest.Build("../../examples/wasm/enrichjoin", module, "-buildmode=c-shared", "-ldflags=-X main.Table="+table); err != nil {
		t.Fatal(err)
	}
	return module
}

// wasmTableSet runs the enrichjoin plugin on the rig's table (TABLES,
// TABLE_MODE) with its table in dir, injected aborts and two workers,
// serving HTTP on addr.
func (r *joinRig) wasmTableSet(module, dir, addr string) func(*launch.Instance) {
	return func(inst *launch.Instance) {
		inst.Transforms, inst.Workers, inst.HTTPAddr = []string{"wasm"}, 2, addr
		inst.CommitInterval = 100 * time.Millisecond
		inst.Settings = map[string]string{"PROCESSOR_WASM_MODULE": module, "PROCESSOR_WASM_TABLES": r.table,
			"PROCESSOR_WASM_TABLE_MODE": r.mode, "PROCESSOR_WASM_TIMEOUT": "1s"}
		inst.Extra = append(inst.Extra, "PROCESSOR_STATE_DIR="+dir, "PROCESSOR_TEST_ABORT_RATE=0.2")
	}
}

// A WebAssembly plugin that looks each order's customer up in a table
// (PROCESSOR_WASM_TABLES) writes every order exactly once with the row
// the table held when the order was processed, as the join transform
// does: rows written before the start are restored before any order
// runs (orders waiting at the start included), updates and tombstones written while it runs are seen, an
// aborted table transaction is not, through a SIGKILL and a SIGTERM;
// co-partitioned and global.
func TestWasmTableExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"co_partitioned", "global"} {
		t.Run(mode, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				r := &joinRig{tg: tg, in: itest.Unique("orders"), table: itest.Unique("customers"), out: itest.Unique("enriched"),
					group: itest.Unique("wasm-table-group"), mode: mode, typ: "left", customers: 20, rowAt: map[int]string{}, rows: map[string]string{}}
				tableParts := 4
				if mode == "global" {
					tableParts = 3
				}
				tg.NewTopics(t, 4, r.in, r.out)
				tg.CreateTopicWithConfigs(t, int32(tableParts), map[string]string{"cleanup.policy": "compact"}, r.table)
				module := enrichJoinModule(t, r.table)
				v1 := map[string]string{}
				for i := range r.customers {
					v1["c"+strconv.Itoa(i)] = fmt.Sprintf(`{"name":"n%d","v":1}`, i)
				}
				r.writeTable(t, v1, true)
				// Orders waiting before the start: they run only once the
				// table is restored, and carry its rows.
				r.produceOrders(t, 0, 100)
				dir, addr := t.TempDir(), itest.FreeAddr(t)
				set, static := r.wasmTableSet(module, dir, addr), func(inst *launch.Instance) { inst.InstanceID = r.group + "-1" }
				p1 := tg.StartBinary(t, r.group, r.group+"-1", r.in, r.out, set, static)
				r.tableCurrent(t, addr, tableParts)
				r.produceOrders(t, 100, 200)
				tg.WaitCaughtUp(t, r.group, r.in)

				r.churn(t, 8, 12, "c1", "c9")
				r.tableCurrent(t, addr, tableParts)
				r.produceOrders(t, 200, 350)
				time.Sleep(300 * time.Millisecond)
				p1.Kill(t)

				p2 := tg.StartBinary(t, r.group, r.group+"-1", r.in, r.out, set, static)
				tg.WaitCaughtUp(t, r.group, r.in)
				r.writeTable(t, map[string]string{"c3": `{"name":"n3","v":3}`, "c15": ""}, true)
				r.tableCurrent(t, addr, tableParts)
				r.produceOrders(t, 350, 450)
				tg.WaitCaughtUp(t, r.group, r.in)
				p2.Terminate(t)
				r.check(t)
			})
		})
	}
}

// A co-partitioned table of another partition count than the input's is
// refused at start, as the join's is: exit 2 and one line naming
// PROCESSOR_WASM_TABLE_MODE and both counts; a table topic that does not
// exist too, naming PROCESSOR_WASM_TABLES.
func TestWasmTableRefused(t *testing.T) {
	t.Parallel()
	tg := itest.NewFake(t)
	in, table, out := itest.Unique("orders"), itest.Unique("customers"), itest.Unique("enriched")
	tg.NewTopics(t, 4, in, out)
	tg.NewTopics(t, 3, table)
	module := enrichJoinModule(t, table)
	for _, c := range []struct{ tables, want string }{
		{table, "PROCESSOR_WASM_TABLE_MODE=co_partitioned: table " + table + " has 3 partitions and input topic " + in + " has 4"},
		{"missing-" + table, "PROCESSOR_WASM_TABLES=\"missing-" + table + "\""},
	} {
		p := tg.StartBinary(t, itest.Unique("g"), itest.Unique("g"), in, out, func(inst *launch.Instance) {
			inst.Transforms = []string{"wasm"}
			inst.Settings = map[string]string{"PROCESSOR_WASM_MODULE": module, "PROCESSOR_WASM_TABLES": c.tables}
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
