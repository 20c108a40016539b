package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// tableRig is a table topic, the rows written to it as committed (the
// reference a table is compared with) and a transactional producer.
type tableRig struct {
	t     *testing.T
	c     *kafkatest.Cluster
	topic string
	dir   string
	parts int32
	prod  *kgo.Client
	rows  map[int32]map[string]string // partition -> key -> latest committed row
}

func newTableRig(t *testing.T, c *kafkatest.Cluster, parts int32) *tableRig {
	r := &tableRig{t: t, c: c, topic: kafkatest.Unique("table"), dir: filepath.Join(t.TempDir(), "tables"), parts: parts,
		rows: map[int32]map[string]string{}}
	c.CreateTopics(t, parts, map[string]string{"cleanup.policy": "compact"}, r.topic)
	r.prod = c.Client(t, kgo.TransactionalID(kafkatest.Unique("table-producer")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range parts {
		r.rows[p] = map[string]string{}
	}
	return r
}

// write produces kv (a "" value is a tombstone) to partition p in one
// transaction, committed or aborted.
func (r *tableRig) write(p int32, kv map[string]string, commit bool) {
	r.t.Helper()
	c := ctx(r.t)
	if err := r.prod.BeginTransaction(); err != nil {
		r.t.Fatal(err)
	}
	for k, v := range kv {
		rec := &kgo.Record{Topic: r.topic, Partition: p, Key: []byte(k)}
		if v != "" {
			rec.Value = []byte(v)
		}
		if err := r.prod.ProduceSync(c, rec).FirstErr(); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.prod.EndTransaction(c, kgo.TransactionEndTry(commit)); err != nil {
		r.t.Fatal(err)
	}
	if !commit {
		return
	}
	for k, v := range kv {
		if v == "" {
			delete(r.rows[p], k)
		} else {
			r.rows[p][k] = v
		}
	}
}

func (r *tableRig) open(global bool) *Table {
	r.t.Helper()
	tb, err := OpenTable(TableOptions{Dir: r.dir, Topic: r.topic, Global: global, ClientOpts: r.c.ClientOpts()})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = tb.Close() })
	return tb
}

// holds reports whether tb's partition p (every partition when global)
// holds exactly the reference rows, with keys probe besides.
func (r *tableRig) holds(tb *Table, p int32, probe []string) error {
	want := map[string]string{}
	if tb.Global() {
		for _, m := range r.rows {
			for k, v := range m {
				want[k] = v
			}
		}
	} else {
		for k, v := range r.rows[p] {
			want[k] = v
		}
	}
	keys := append([]string(nil), probe...)
	for k := range want {
		keys = append(keys, k)
	}
	for _, k := range keys {
		v, ok, err := tb.Lookup(p, []byte(k))
		if err != nil {
			return err
		}
		if w, has := want[k]; ok != has || string(v) != w {
			return fmt.Errorf("partition %d key %q: got %q (%v), want %q (%v)", p, k, v, ok, w, has)
		}
	}
	if st := tb.Status(); tb.Global() && st.Keys != int64(len(want)) {
		return fmt.Errorf("status keys %d, want %d", st.Keys, len(want))
	}
	return nil
}

// eventually waits, within a bound far beyond what it needs, until
// holds is nil.
func (r *tableRig) eventually(tb *Table, p int32, probe []string) {
	r.t.Helper()
	deadline := time.Now().Add(restoreBound)
	for {
		err := r.holds(tb, p, probe)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the table did not catch up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTable(t *testing.T) {
	kafkatest.ForEach(t, []kfake.Opt{kfake.NumBrokers(1)}, func(t *testing.T, c *kafkatest.Cluster) {
		t.Run("co-partitioned", func(t *testing.T) { tableCoPartitioned(t, c) })
		t.Run("global", func(t *testing.T) { tableGlobal(t, c) })
		t.Run("empty-and-marker-tail", func(t *testing.T) { tableMarkerTail(t, c) })
	})
}

// Restored from the topic, kept current (updates, tombstones, aborted
// transactions), reopened from its checkpoint, and rebuilt when wiped.
func tableCoPartitioned(t *testing.T, c *kafkatest.Cluster) {
	r := newTableRig(t, c, 2)
	r.write(0, map[string]string{"a": `{"n":1}`, "b": `{"n":2}`}, true)
	r.write(1, map[string]string{"c": `{"n":3}`}, true)
	r.write(0, map[string]string{"a": `{"n":"aborted"}`, "z": "x"}, false)
	tb := r.open(false)
	if err := tb.Restore(ctx(t), []int32{0}); err != nil {
		t.Fatal(err)
	}
	if err := r.holds(tb, 0, []string{"c", "z"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Lookup(1, []byte("c")); !errors.Is(err, ErrTableNotReady) {
		t.Fatalf("partition 1 not assigned: %v, want ErrTableNotReady", err)
	}
	r.write(0, map[string]string{"a": `{"n":10}`, "b": "", "d": `{"n":4}`}, true) // while it follows
	r.write(0, map[string]string{"d": "", "e": "aborted"}, false)
	r.eventually(tb, 0, []string{"b", "e"})

	if err := tb.Restore(ctx(t), []int32{0, 1}); err != nil { // a rebalance brings partition 1
		t.Fatal(err)
	}
	r.eventually(tb, 1, []string{"a"})
	r.eventually(tb, 0, nil)
	_ = tb.Close()

	r.write(1, map[string]string{"c": "", "f": `{"n":5}`}, true)
	tb = r.open(false)
	if err := tb.Restore(ctx(t), []int32{0, 1}); err != nil {
		t.Fatal(err)
	}
	st := tb.Status()
	if st.Partitions[0].Restored != 0 || st.Partitions[1].Restored != 2 || st.Partitions[0].Rebuilt {
		t.Fatalf("reopened: %+v, want only partition 1's tail of 2 rows read", st.Partitions)
	}
	r.eventually(tb, 0, nil)
	r.eventually(tb, 1, []string{"c"})
	_ = tb.Close()

	if err := os.RemoveAll(r.dir); err != nil {
		t.Fatal(err)
	}
	tb = r.open(false)
	if err := tb.Restore(ctx(t), []int32{0, 1}); err != nil {
		t.Fatal(err)
	}
	if st := tb.Status(); !st.Partitions[0].Rebuilt || !st.Ready || st.Keys != 3 {
		t.Fatalf("wiped: %+v, want rebuilt, ready, 3 keys", st)
	}
	r.eventually(tb, 0, []string{"b"})
	r.eventually(tb, 1, []string{"c"})
}

// Every partition, whatever the assignment, on every instance.
func tableGlobal(t *testing.T, c *kafkatest.Cluster) {
	r := newTableRig(t, c, 3)
	r.write(0, map[string]string{"a": "1"}, true)
	r.write(2, map[string]string{"b": "2"}, true)
	tb := r.open(true)
	if err := tb.Restore(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := r.holds(tb, p, []string{"x"}); err != nil {
			t.Fatal(err)
		}
	}
	r.write(1, map[string]string{"x": "3"}, true)
	r.write(0, map[string]string{"a": ""}, true) // a key's rows stay in its partition
	r.eventually(tb, 0, []string{"a"})
	_ = tb.Close()
	r.write(1, map[string]string{"y": "4"}, true)
	tb = r.open(true)
	if err := tb.Restore(ctx(t), []int32{0}); err != nil {
		t.Fatal(err)
	}
	if st := tb.Status(); len(st.Partitions) != 3 || st.Partitions[1].Restored != 1 || st.Partitions[0].Rebuilt {
		t.Fatalf("reopened: %+v, want 3 partitions, the tail of 1 row read", st.Partitions)
	}
	r.eventually(tb, 2, []string{"a"})
}

// An empty table, and one whose tail is an aborted transaction's marker,
// finish restoring.
func tableMarkerTail(t *testing.T, c *kafkatest.Cluster) {
	r := newTableRig(t, c, 1)
	tb := r.open(false)
	if err := tb.Restore(ctx(t), []int32{0}); err != nil {
		t.Fatal(err)
	}
	if err := r.holds(tb, 0, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	_ = tb.Close()
	r.write(0, map[string]string{"a": "1"}, true)
	r.write(0, map[string]string{"a": "aborted"}, false)
	tb = r.open(false)
	c2, cancel := context.WithTimeout(ctx(t), restoreBound)
	defer cancel()
	if err := tb.Restore(c2, []int32{0}); err != nil {
		t.Fatal(err)
	}
	if err := r.holds(tb, 0, nil); err != nil {
		t.Fatal(err)
	}
}
