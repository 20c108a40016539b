package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The join mode: with join last in -transforms (-transforms join, or
// jq,join) the instances join every input with the row of its record key
// in a table topic of the run's own (PROCESSOR_JOIN_TABLE, INTO .row,
// TYPE -join-type, MODE -join-mode), kept in each instance's state
// directory. The drill creates the table compacted, co-partitioned with
// the input (six partitions, the same keys and partitioner) or, with
// -join-mode global, with three; pre-loads a row for three in four of
// the input's keys, and keeps writing it in transactions while the input
// is written and the faults land: new rows, updates and tombstones, every
// -table-abort'th transaction aborted. Every row is a version of its own,
// {"key": label, "version": N}, so eoscheck -check join can tell an
// aborted row (join-invented) and an older one (join-stale) from the row
// a record must carry. The wipe fault rebuilds a wiped instance's table
// from the table topic.

// joinInto is the drill's PROCESSOR_JOIN_INTO and eoscheck's -join-into.
const joinInto = ".row"

// tableWrites are the rows the table writer made, for the report.
type tableWrites struct {
	mu                              sync.Mutex
	preloaded, rows, tombstones     int
	committed, aborted, abortedRows int
}

// tableRow returns the value of row version v of key number j.
func (o options) tableRow(j, v int) []byte {
	_, label := o.keyNumber(j)
	b, _ := json.Marshal(struct {
		Key     string `json:"key"`
		Version int    `json:"version"`
	}{label, v})
	return b
}

// keyNumber returns key number j of the input's key space and its label,
// as inputKey makes them.
func (o options) keyNumber(j int) (key, label string) {
	if o.keys == keysBinary {
		return string(binaryKey(j)), binaryLabel(j)
	}
	key = "k" + strconv.Itoa(j)
	return key, key
}

// tableWriter writes the table topic in transactions of its own.
type tableWriter struct {
	d       *driver
	cl      *kgo.Client
	rng     *rand.Rand
	version int
}

// newTableWriter makes the table's transactional producer.
func (d *driver) newTableWriter() (*tableWriter, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.DefaultProduceTopic(d.joinTable),
		kgo.TransactionalID(d.joinTable+"-writer"), kgo.TransactionTimeout(d.o.txnTimeout))
	if err != nil {
		return nil, fmt.Errorf("the table writer: %w", err)
	}
	return &tableWriter{d: d, cl: cl, rng: rand.New(rand.NewPCG(d.o.seed, 3))}, nil
}

// txn writes rows (key number to a new version, or -1 for a tombstone)
// in one transaction, committed or aborted.
func (w *tableWriter) txn(ctx context.Context, keys []int, tombstone func(int) bool, commit bool) error {
	if err := w.cl.BeginTransaction(); err != nil {
		return err
	}
	rows, tombs := 0, 0
	var failed atomic.Pointer[error]
	for _, j := range keys {
		key, _ := w.d.o.keyNumber(j)
		rec := &kgo.Record{Key: []byte(key)}
		if tombstone(j) {
			tombs++
		} else {
			w.version++
			rec.Value = w.d.o.tableRow(j, w.version)
			rows++
		}
		w.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	// Every record acknowledged before the transaction ends: ended
	// with records in flight, it would abort.
	if err := w.cl.Flush(ctx); err != nil {
		return err
	}
	if e := failed.Load(); e != nil {
		return *e
	}
	if err := w.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		return err
	}
	s := &w.d.tableStats
	s.mu.Lock()
	defer s.mu.Unlock()
	if !commit {
		s.aborted++
		s.abortedRows += rows + tombs
		return nil
	}
	s.committed++
	s.rows += rows
	s.tombstones += tombs
	return nil
}

// preloadTable writes a row for three in four of the input's keys, in
// one committed transaction, before any instance starts.
func (d *driver) preloadTable(w *tableWriter) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys []int
	for j := range keySpace {
		if j%4 != 3 {
			keys = append(keys, j)
		}
	}
	if err := w.txn(ctx, keys, func(int) bool { return false }, true); err != nil {
		return fmt.Errorf("pre-loading the table %s: %w", d.joinTable, err)
	}
	d.tableStats.mu.Lock()
	d.tableStats.preloaded, d.tableStats.rows, d.tableStats.committed = len(keys), 0, 0
	d.tableStats.mu.Unlock()
	return nil
}

// updateTable writes the table until done is closed: every
// -table-interval a transaction of eight random keys, one in six a
// tombstone, every -table-abort'th transaction aborted. It ends with a
// committed transaction, so that no table transaction stays open.
func (d *driver) updateTable(w *tableWriter, done <-chan struct{}) error {
	defer w.cl.Close()
	for n := 1; ; n++ {
		select {
		case <-done:
			return nil
		case <-time.After(d.o.tableInterval):
		}
		keys := make([]int, 8)
		for i := range keys {
			keys[i] = w.rng.IntN(keySpace)
		}
		commit := d.o.tableAbort == 0 || n%d.o.tableAbort != 0
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := w.txn(ctx, keys, func(int) bool { return w.rng.IntN(6) == 0 }, commit)
		cancel()
		if err != nil {
			return fmt.Errorf("writing the table %s: %w", d.joinTable, err)
		}
	}
}

// joinSettings sets the join's settings on an instance.
func (d *driver) joinSettings(in map[string]string) {
	in["PROCESSOR_JOIN_TABLE"] = d.joinTable
	in["PROCESSOR_JOIN_INTO"] = joinInto
	in["PROCESSOR_JOIN_TYPE"] = d.o.joinType
	in["PROCESSOR_JOIN_MODE"] = d.o.joinMode
}

// joinArgs are eoscheck's arguments of the join check.
func (d *driver) joinArgs() []string {
	args := []string{"-check", "join", "-join-table", d.joinTable, "-join-into", joinInto, "-join-type", d.o.joinType}
	if d.o.joinType == "inner" {
		args = append(args, "-one-to-one=false") // an input without a row is filtered
	}
	return args
}

// printJoin prints, in the join mode, the table and what was written to
// it.
func (d *driver) printJoin() {
	if d.o.counter() != "join" {
		return
	}
	s := &d.tableStats
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Printf("%-10s %s join of %s (%s) into %s by record key: %d rows pre-loaded, then %d transactions committed (%d rows, %d tombstones), %d aborted (%d records)\n",
		"join", d.o.joinType, d.joinTable, d.o.joinMode, joinInto, s.preloaded, s.committed, s.rows, s.tombstones, s.aborted, s.abortedRows)
}

// resolveJoin checks the join mode's flags.
func (o *options) resolveJoin(f *listFlags) {
	if o.counter() != "join" {
		for _, name := range []string{"join-type", "join-mode", "table-interval", "table-abort"} {
			if f.set[name] {
				usage("-%s needs join in -transforms", name)
			}
		}
		return
	}
	if o.joinType != "left" && o.joinType != "inner" {
		usage("-join-type %q: want left or inner", o.joinType)
	}
	if o.joinMode != "co_partitioned" && o.joinMode != "global" {
		usage("-join-mode %q: want co_partitioned or global", o.joinMode)
	}
	if o.tableInterval <= 0 || o.tableAbort < 0 {
		usage("-table-interval must be positive and -table-abort not negative")
	}
	if o.keys == keysOrders {
		usage("-keys orders does not go with join: the drill joins by record key")
	}
	if o.joinType == "inner" {
		// A marked input's key has no row: an inner join filters it,
		// which eoscheck -poison counts as lost.
		if f.set["poison-every"] && o.poisonEvery > 0 {
			usage("-join-type inner needs -poison-every 0 (a marked input has no row, and is filtered)")
		}
		o.poisonEvery = 0
	}
}

// startTable, in the join mode, pre-loads the table and starts writing
// it; closing done stops the writer, whose result comes on the channel
// returned. Outside the join mode it does nothing.
func (d *driver) startTable() (done chan struct{}, written <-chan error, err error) {
	done = make(chan struct{})
	result := make(chan error, 1)
	if d.joinTable == "" {
		result <- nil
		return done, result, nil
	}
	w, err := d.newTableWriter()
	if err != nil {
		return nil, nil, err
	}
	if err := d.preloadTable(w); err != nil {
		w.cl.Close()
		return nil, nil, err
	}
	go func() { result <- d.updateTable(w, done) }()
	return done, result, nil
}
