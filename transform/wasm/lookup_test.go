package wasm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/transformtest"
)

const enrichJoin = "../../examples/wasm/enrichjoin"

// memTable is a transform.Table in memory: rows by partition (-1 for a
// global table), and partitions not restored.
type memTable struct {
	mu      sync.Mutex
	rows    map[int32]map[string]string
	pending map[int32]bool
	asked   []int32 // the partitions looked up, in order
}

func (m *memTable) Lookup(p int32, key []byte) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, p)
	if m.pending[p] {
		return nil, false, state.ErrTableNotReady
	}
	v, ok := m.rows[p][string(key)]
	if !ok {
		return nil, false, nil
	}
	return []byte(v), true, nil
}

func (m *memTable) Miss() {}

func withTables(names, mode string) func(*Settings) {
	return func(s *Settings) { s.Tables, s.TableMode = names, mode }
}

func lookupIn(tr *Transform, part int32, key, value string) (string, error) {
	src := record.Source{Topic: "orders", Partition: part, Offset: 1}
	out, err := tr.Process(context.Background(), src, &kgo.Record{Key: []byte(key), Value: []byte(value)}, nil)
	if err != nil {
		return "", err
	}
	if len(out) != 1 {
		return "", errors.New("not one output")
	}
	return string(out[0].Value), nil
}

// The guest reads the row of the record's key in the table of the
// record's partition (co-partitioned), sees no row as null, and a row
// changed or deleted between two records as the table then holds it.
func TestWasmTableLookup(t *testing.T) {
	tr := newTest(t, enrichJoin, withTables("customers", "co_partitioned"))
	if refs := tr.JoinTables(); len(refs) != 1 || refs[0].Topic != "customers" || refs[0].Global ||
		refs[0].TableSetting != "TABLES" || refs[0].ModeSetting != "TABLE_MODE" || !tr.Ordered() {
		t.Fatalf("JoinTables %+v, ordered %v", refs, tr.Ordered())
	}
	if _, err := lookupIn(tr, 0, "c1", `{}`); err == nil || !strings.Contains(err.Error(), "table customers: no table") {
		t.Errorf("before the table is bound: %v, want a failed record", err)
	}
	long := strings.Repeat("x", 1000) // more than the SDK's first buffer
	tb := &memTable{rows: map[int32]map[string]string{
		0: {"c1": `{"name":"Ann"}`},
		3: {"c1": `{"name":"Bob"}`, "c2": `{"s":"` + long + `"}`},
	}}
	tr.BindTable("other", &memTable{}) // not one of TABLES: ignored
	tr.BindTable("customers", tb)
	for _, c := range []struct {
		part      int32
		key, want string
	}{
		{0, "c1", `{"o":1,"row":{"name":"Ann"}}`},
		{3, "c1", `{"o":1,"row":{"name":"Bob"}}`},
		{3, "c2", `{"o":1,"row":{"s":"` + long + `"}}`},
		{0, "c2", `{"o":1,"row":null}`},
		{1, "c1", `{"o":1,"row":null}`},
	} {
		got, err := lookupIn(tr, c.part, c.key, `{"o":1}`)
		if err != nil || got != c.want {
			t.Errorf("partition %d key %s: %.80s %v, want %.80s", c.part, c.key, got, err, c.want)
		}
	}
	tb.mu.Lock()
	tb.rows[0]["c1"] = `{"name":"Ann","v":2}`
	delete(tb.rows[3], "c1")
	var asked []int32 // a longer row is asked for twice: its size, then it
	for _, p := range tb.asked {
		if len(asked) == 0 || asked[len(asked)-1] != p {
			asked = append(asked, p)
		}
	}
	tb.mu.Unlock()
	if want := []int32{0, 3, 0, 1}; !equalParts(asked, want) {
		t.Errorf("partitions looked up %v, want %v", asked, want)
	}
	if got, _ := lookupIn(tr, 0, "c1", `{}`); got != `{"row":{"name":"Ann","v":2}}` {
		t.Errorf("an updated row: %s", got)
	}
	if got, _ := lookupIn(tr, 3, "c1", `{}`); got != `{"row":null}` {
		t.Errorf("a deleted row: %s", got)
	}

	// A partition not restored fails the record as unavailable, as the
	// join's lookup does; the instance is kept.
	tb.mu.Lock()
	tb.pending = map[int32]bool{2: true}
	tb.mu.Unlock()
	_, err := lookupIn(tr, 2, "c1", `{}`)
	if !transform.IsUnavailable(err) || !errors.Is(err, state.ErrTableNotReady) || !strings.Contains(err.Error(), "table customers") {
		t.Errorf("a partition not restored: %v, want unavailable", err)
	}
	if len(idle(tr)) != 1 {
		t.Errorf("the instance was not kept")
	}
}

func equalParts(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A global table is read whole, whatever the record's partition.
func TestWasmTableGlobal(t *testing.T) {
	tr := newTest(t, enrichJoin, withTables("customers,products", "global"))
	refs := tr.JoinTables()
	if len(refs) != 2 || !refs[0].Global || !refs[1].Global || refs[1].Topic != "products" {
		t.Fatalf("JoinTables %+v", refs)
	}
	tb := &memTable{rows: map[int32]map[string]string{2: {"c1": `"whole"`}}}
	tr.BindTable("customers", tb)
	tr.BindTable("products", &memTable{})
	// The guest reads partition 2 when the record comes from 2; a global
	// table answers every partition from its one key space, which the
	// processor's state.Table keeps, so the host passes the partition on
	// unchanged and the table decides.
	if got, err := lookupIn(tr, 2, "c1", `{}`); err != nil || got != `{"row":"whole"}` {
		t.Errorf("got %s %v", got, err)
	}
}

// A lookup of a table not declared in TABLES fails the record, naming
// the table and the setting; a module importing table_lookup without
// TABLES is refused at start naming TABLES; TABLES and TABLE_MODE are
// checked.
func TestWasmTableSettings(t *testing.T) {
	other := guestPathWith(t, enrichJoin, "-buildmode=c-shared", "-ldflags=-X main.Table=products")
	tr, err := newTransform(&Settings{Module: other, MaxMemory: 64 << 20, Timeout: 1e9, Tables: "customers"}, testCache)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.BindTable("customers", &memTable{})
	_, err = lookupIn(tr, 0, "c1", `{}`)
	var msg *settings.Message
	if err == nil || !errors.As(err, &msg) || !strings.Contains(err.Error(), `table "products" is not declared`) ||
		!strings.Contains(err.Error(), "TABLES=customers") {
		t.Errorf("an undeclared table: %v", err)
	}

	module := guestPath(t, enrichJoin)
	build := func(s map[string]string) (*transform.Chain, error) {
		s["MODULE"] = module
		return transformtest.Build("wasm", s)
	}
	if _, err := build(map[string]string{}); err == nil || !strings.Contains(err.Error(), "TABLES") || !strings.Contains(err.Error(), "processor.table_lookup") {
		t.Errorf("a module importing table_lookup without TABLES: %v", err)
	}
	if _, err := build(map[string]string{"STORES": "s"}); err == nil || !strings.Contains(err.Error(), "TABLES") {
		t.Errorf("with STORES but no TABLES: %v", err)
	}
	for _, c := range []struct{ field, tables, mode string }{
		{"TABLES", "a,a", "global"}, {"TABLES", "a b", "global"}, {"TABLE_MODE", "customers", "both"},
	} {
		_, err := build(map[string]string{"TABLES": c.tables, "TABLE_MODE": c.mode})
		var se *settings.Error
		if !errors.As(err, &se) || se.Field != c.field {
			t.Errorf("TABLES=%s TABLE_MODE=%s: %v, want a setting error of %s", c.tables, c.mode, err, c.field)
		}
	}
	chain, err := build(map[string]string{"TABLES": "customers"})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	if js := chain.Joins(); len(js) != 1 || js[0].Joiner.JoinTables()[0].Global {
		t.Errorf("the chain's table stages: %+v", js)
	}
	// A module that reads no table may still be given some (the
	// processor keeps them); one without TABLES reads none.
	up, err := transformtest.Build("wasm", map[string]string{"MODULE": guestPath(t, uppercase)})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if len(up.Joins()) != 0 {
		t.Errorf("without TABLES the stage reads tables")
	}
}
