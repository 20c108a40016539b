package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

const testTimeout = 60 * time.Second

// env is a kfake cluster, a group's stores on it, and a transactional
// producer that keeps changelog records in their partitions.
type env struct {
	t     *testing.T
	c     *kafkatest.Cluster
	dir   string
	group string
	prod  *kgo.Client
	parts int32
}

func newEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	c := kafkatest.NewFake(t, kfake.NumBrokers(1))
	e := &env{t: t, c: c, dir: filepath.Join(t.TempDir(), "state"), group: "g", parts: partitions}
	topics := []string{ChangelogTopic(e.group, "counts"), ChangelogTopic(e.group, "seen")}
	e.prod = c.Client(t, kgo.TransactionalID("test-producer"),
		kgo.RecordPartitioner(Partitioner(kgo.StickyKeyPartitioner(nil), topics)))
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// open opens the manager in e.dir, ensures its changelogs and restores
// every partition.
func (e *env) open() *Manager {
	e.t.Helper()
	m, err := Open(Options{Dir: e.dir, Group: e.group, Stores: []string{"counts", "seen"}, ClientOpts: e.c.ClientOpts()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = m.Close() })
	// An admin client of its own: kadm caches the metadata that showed
	// the changelogs missing, which would hide them from the test's reads.
	adm := kadm.NewClient(e.c.Client(e.t))
	if err := m.EnsureChangelogs(ctx(e.t), adm, e.parts); err != nil {
		e.t.Fatal(err)
	}
	if err := m.Restore(ctx(e.t), e.all()); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) all() []int32 {
	var ps []int32
	for p := range e.parts {
		ps = append(ps, p)
	}
	return ps
}

// kafka produces recs in one Kafka transaction and commits or aborts it.
func (e *env) kafka(recs []*kgo.Record, commit bool) {
	e.t.Helper()
	c := ctx(e.t)
	if err := e.prod.BeginTransaction(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.prod.ProduceSync(c, recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.prod.EndTransaction(c, kgo.TransactionEndTry(commit)); err != nil {
		e.t.Fatal(err)
	}
}

// txn runs fn in a transaction whose records are produced and committed
// in Kafka; apply says whether Commit follows (false: a kill after the
// Kafka commit).
func (e *env) txn(m *Manager, apply bool, fn func(t *Txn)) {
	e.t.Helper()
	tx, err := m.Begin()
	if err != nil {
		e.t.Fatal(err)
	}
	fn(tx)
	e.kafka(tx.Records(), true)
	if !apply {
		tx.Abort() // what a restart does to it
		return
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

func store(t *testing.T, tx *Txn, name string, p int32) Store {
	t.Helper()
	s, err := tx.Store(name, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s Store, k, v string) {
	t.Helper()
	if err := s.Put([]byte(k), []byte(v), time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// want checks the value of key in partition p of store name, as a fresh
// transaction reads it; "" means absent.
func want(t *testing.T, m *Manager, name string, p int32, key, val string) {
	t.Helper()
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	got, ok, err := store(t, tx, name, p).Get([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	if val == "" && ok {
		t.Fatalf("%s/%d %q = %q, want absent", name, p, key, got)
	}
	if val != "" && (!ok || string(got) != val) {
		t.Fatalf("%s/%d %q = %q (found %v), want %q", name, p, key, got, ok, val)
	}
}

func status(t *testing.T, m *Manager, name string, p int32) StoreStatus {
	t.Helper()
	for _, s := range m.Status() {
		if s.Store == name && s.Partition == p {
			return s
		}
	}
	t.Fatalf("no status of %s/%d in %+v", name, p, m.Status())
	return StoreStatus{}
}

// A committed transaction is in the local store after a reopen, which
// reads nothing from the changelog; one committed in Kafka but not applied
// (a kill between the two) is read back from the changelog's tail alone.
func TestCommitReopenAndKill(t *testing.T) {
	e := newEnv(t, 2)
	m := e.open()
	e.txn(m, true, func(tx *Txn) {
		for i := range 10 {
			put(t, store(t, tx, "counts", int32(i%2)), fmt.Sprint("k", i), fmt.Sprint("v", i))
		}
		put(t, store(t, tx, "counts", 0), "k0", "last") // collapsed: one record per key
	})
	if n := len(e.c.ReadAll(t, ChangelogTopic("g", "counts"), true)); n != 10 {
		t.Fatalf("%d changelog records, want 10 (one per key)", n)
	}
	st := status(t, m, "counts", 0)
	if st.Keys != 5 || st.Checkpoint != 5 { // offsets 0..4, the marker at 5
		t.Fatalf("status %+v, want 5 keys and checkpoint 5", st)
	}
	_ = m.Close()

	m = e.open()
	if st := status(t, m, "counts", 0); st.RestoredRecords != 0 || st.Rebuilt || st.Keys != 5 {
		t.Fatalf("after a clean reopen: %+v, want nothing restored", st)
	}
	want(t, m, "counts", 0, "k0", "last")
	want(t, m, "counts", 1, "k9", "v9")

	e.txn(m, false, func(tx *Txn) {
		put(t, store(t, tx, "counts", 1), "k1", "killed")
		put(t, store(t, tx, "counts", 1), "new", "x")
	})
	want(t, m, "counts", 1, "k1", "v1") // not applied: the process "died"
	_ = m.Close()

	m = e.open()
	st = status(t, m, "counts", 1)
	if st.RestoredRecords != 2 || st.Rebuilt {
		t.Fatalf("after a kill: %+v, want the 2 records of the tail restored", st)
	}
	want(t, m, "counts", 1, "k1", "killed")
	want(t, m, "counts", 1, "new", "x")
	if st.Keys != 6 {
		t.Fatalf("keys %d, want 6", st.Keys)
	}
}

// An aborted transaction changes nothing, locally or in what a
// read_committed reader of the changelog sees, even after a restore.
func TestAbort(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	put(t, store(t, tx, "seen", 0), "id", "1")
	e.kafka(tx.Records(), false)
	tx.Abort()
	want(t, m, "seen", 0, "id", "")
	if recs := e.c.ReadAll(t, ChangelogTopic("g", "seen"), true); len(recs) != 0 {
		t.Fatalf("%d committed changelog records after an abort", len(recs))
	}
	_ = m.Close()
	m = e.open()
	want(t, m, "seen", 0, "id", "")
	e.txn(m, true, func(tx *Txn) { put(t, store(t, tx, "seen", 0), "id", "2") })
	want(t, m, "seen", 0, "id", "2")
}

// A wiped directory is rebuilt from the changelog's start with the same
// state, deletions included.
func TestRebuildWiped(t *testing.T) {
	e := newEnv(t, 2)
	m := e.open()
	e.txn(m, true, func(tx *Txn) {
		put(t, store(t, tx, "counts", 0), "a", "1")
		put(t, store(t, tx, "counts", 0), "b", "2")
	})
	e.txn(m, true, func(tx *Txn) {
		if err := store(t, tx, "counts", 0).Delete([]byte("a")); err != nil {
			t.Fatal(err)
		}
		put(t, store(t, tx, "counts", 0), "b", "3")
	})
	_ = m.Close()
	if err := os.RemoveAll(e.dir); err != nil {
		t.Fatal(err)
	}
	m = e.open()
	st := status(t, m, "counts", 0)
	if !st.Rebuilt || st.RestoredRecords != 4 || st.Keys != 1 {
		t.Fatalf("status %+v, want rebuilt from 4 records to 1 key", st)
	}
	want(t, m, "counts", 0, "a", "")
	want(t, m, "counts", 0, "b", "3")
}

// A checkpoint the changelog cannot have written (the topic recreated,
// shorter) makes the partition rebuild: keys of the old topic are gone.
func TestRecreatedChangelog(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	e.txn(m, true, func(tx *Txn) {
		for i := range 5 {
			put(t, store(t, tx, "counts", 0), fmt.Sprint("old", i), "x")
		}
	})
	_ = m.Close()
	topic := ChangelogTopic("g", "counts")
	if _, err := e.c.Admin(t).DeleteTopics(ctx(t), topic); err != nil {
		t.Fatal(err)
	}
	e.c.CreateTopics(t, 1, map[string]string{"cleanup.policy": "compact"}, topic)
	e.prod = e.c.Client(t, kgo.TransactionalID("test-producer-2"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e.kafka([]*kgo.Record{{Topic: topic, Partition: 0, Key: []byte("fresh"), Value: encodeValue(0, []byte("y"))}}, true)
	m = e.open()
	if st := status(t, m, "counts", 0); !st.Rebuilt || st.Keys != 1 {
		t.Fatalf("status %+v, want rebuilt to 1 key", st)
	}
	want(t, m, "counts", 0, "old0", "")
	want(t, m, "counts", 0, "fresh", "y")
}

// A changelog of another partition count or cleanup.policy is refused
// with a MismatchError.
func TestMismatch(t *testing.T) {
	for _, tc := range []struct {
		parts  int32
		policy string
	}{{3, "compact"}, {2, "delete"}, {2, "compact,delete"}} {
		e := newEnv(t, 2)
		e.c.CreateTopics(t, tc.parts, map[string]string{"cleanup.policy": tc.policy}, ChangelogTopic("g", "seen"))
		m, err := Open(Options{Dir: e.dir, Group: "g", Stores: []string{"counts", "seen"}, ClientOpts: e.c.ClientOpts()})
		if err != nil {
			t.Fatal(err)
		}
		err = m.EnsureChangelogs(ctx(t), e.c.Admin(t), 2)
		var me *MismatchError
		if !errors.As(err, &me) || me.Topic != "g-seen-changelog" {
			t.Fatalf("%d partitions, %s: %v, want a MismatchError", tc.parts, tc.policy, err)
		}
		t.Log(err)
		_ = m.Close()
	}
}

// Reads see the transaction's own writes and deletions before anything is
// committed; a partition not restored is refused.
func TestReadYourWrites(t *testing.T) {
	e := newEnv(t, 2)
	m := e.open()
	e.txn(m, true, func(tx *Txn) { put(t, store(t, tx, "counts", 0), "k", "committed") })
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Begin(); !errors.Is(err, ErrTxnOpen) {
		t.Fatalf("a second Begin: %v, want ErrTxnOpen", err)
	}
	s := store(t, tx, "counts", 0)
	get := func(k string) string {
		v, ok, err := s.Get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "<absent>"
		}
		return string(v)
	}
	if v := get("k"); v != "committed" {
		t.Fatalf("k = %s", v)
	}
	put(t, s, "k", "mine")
	if v := get("k"); v != "mine" {
		t.Fatalf("k = %s after Put, want mine", v)
	}
	if err := s.Delete([]byte("k")); err != nil {
		t.Fatal(err)
	}
	if v := get("k"); v != "<absent>" {
		t.Fatalf("k = %s after Delete", v)
	}
	tx.Abort()
	want(t, m, "counts", 0, "k", "committed")
	m.Revoke([]int32{1})
	tx, _ = m.Begin()
	defer tx.Abort()
	if _, err := tx.Store("counts", 1); !errors.Is(err, ErrNotRestored) {
		t.Fatalf("a revoked partition: %v, want ErrNotRestored", err)
	}
	if _, err := tx.Store("nope", 0); !errors.Is(err, ErrUnknownStore) {
		t.Fatalf("an unknown store: %v, want ErrUnknownStore", err)
	}
}

// A Commit whose changelog records were not acknowledged applies nothing
// and leaves the partition to be restored again.
func TestCommitUnacknowledged(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	put(t, store(t, tx, "counts", 0), "k", "v")
	_ = tx.Records() // never produced
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit of records never produced succeeded")
	}
	if st := status(t, m, "counts", 0); st.Ready || st.Keys != 0 {
		t.Fatalf("status %+v, want not ready and nothing applied", st)
	}
	if err := m.Restore(ctx(t), []int32{0}); err != nil {
		t.Fatal(err)
	}
	want(t, m, "counts", 0, "k", "")
}
