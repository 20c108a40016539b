package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A Table is a table topic (compacted, keyed by the table's key) kept in
// a local Pebble database for the join transform: the latest row per key
// by offset, an unversioned table as Kafka Streams' KTable is. Its
// changelog is the table topic itself, which the processor never writes:
// it is read read_committed, a tombstone (a null value) deletes its key.
//
// The local database lives in a directory of its own (TableOptions.Dir)
// and holds, beside the rows, each table partition's checkpoint (the next
// offset the local copy reflects, and the topic's ID) written in the same
// batch as the rows it covers. Restore reads each partition from its
// checkpoint to the end offset captured when Restore began (see fetcher:
// restored means that the fetch position reached that end, so an empty
// partition, a compacted tail and one that ends in a transaction marker
// all finish), then a follower (the same fetches, without an end)
// keeps the copy current while the stream runs, until the next Restore or
// Close. A record therefore joins the table as this instance has read it
// when the record is processed.
//
// Co-partitioned (the default), the table keeps the partitions Restore is
// given, those of the input assigned to the instance, each in a key space
// of its own: partition p of the input joins partition p of the table.
// Global, it keeps every partition of the table in one key space, on
// every instance, whatever the assignment.
type Table struct {
	o     TableOptions
	log   *slog.Logger
	db    *local
	wiped string // why Open wiped the local store (openStore); "" once restored

	mu    sync.Mutex
	parts map[int32]*tablePart // the partitions kept or being restored
	stats map[int32]partState  // keys and bytes by key space (scope)
	id    [16]byte
	fol   *follower

	ready  atomic.Pointer[map[int32][]byte] // scope -> data key prefix, for the scopes ready
	failed atomic.Pointer[error]            // the follower's failure, which ends lookups
	bad    atomic.Int64                     // rows that did not decode
	misses atomic.Int64
	closed atomic.Bool
}

// TableOptions configure a Table. Dir and Topic are required.
type TableOptions struct {
	// Dir is the directory of the table's local database, created if
	// missing; one Table uses it at a time.
	Dir string
	// Topic is the table topic.
	Topic string
	// Global keeps every partition of the table, whatever Restore is
	// given.
	Global bool
	// ClientOpts reach the brokers (seed brokers, TLS, SASL), for the
	// restore's and the follower's fetches.
	ClientOpts []kgo.Opt
	// Decode, when set, turns a row's value as written into the JSON
	// kept (a Schema Registry format decoded as inputs are). A row that
	// does not decode is left out and counted (TableStatus.Undecodable).
	Decode func(value []byte) ([]byte, error)
	// Logger receives a line per restore; nil logs nothing.
	Logger *slog.Logger
	// OnFatal is Options.OnFatal for the table's database.
	OnFatal func(error)
	// CacheBytes is Options.CacheBytes for the table's database.
	CacheBytes int64
}

// globalScope is the key space of a global table's rows, which come from
// every partition.
const globalScope = -1

// ErrTableNotReady is returned by Lookup for a partition the table has
// not restored (not assigned, or restoring).
var ErrTableNotReady = errors.New("state: table partition not restored")

// tablePart is what a Table knows of one partition of its topic.
type tablePart struct {
	st        partState // checkpoint; keys and bytes are in Table.stats
	restoring bool
	from, end int64 // the last restore's bounds
	restored  int64 // rows the last restore read
	stable    int64 // the partition's last stable offset, as last seen
	rebuilt   bool
}

// OpenTable opens (or creates) the table's local database. It does not
// contact Kafka: Restore does.
func OpenTable(o TableOptions) (*Table, error) {
	if o.Dir == "" || o.Topic == "" {
		return nil, errors.New("state: TableOptions.Dir and Topic are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	db, wiped, err := openStore(o.Dir, o.CacheBytes, o.OnFatal)
	if err != nil {
		return nil, err
	}
	t := &Table{o: o, log: o.Logger, db: db, wiped: wiped.reason,
		parts: map[int32]*tablePart{}, stats: map[int32]partState{}}
	t.ready.Store(&map[int32][]byte{})
	switch wiped.reason {
	case "layout":
		t.log.Warn("state: the table's local store was written by an older build in another key layout; it was wiped and is rebuilt from the table topic (once, after an upgrade)",
			"dir", o.Dir, "table", o.Topic)
	case "damaged":
		t.log.Warn("state: the table's local store was damaged; it was wiped and is rebuilt from the table topic", "dir", o.Dir, "table", o.Topic, "damage", wiped.detail)
	}
	return t, nil
}

// Topic returns the table topic.
func (t *Table) Topic() string { return t.o.Topic }

// Global reports whether the table keeps every partition.
func (t *Table) Global() bool { return t.o.Global }

// scope is the key space of partition p's rows.
func (t *Table) scope(p int32) int32 {
	if t.o.Global {
		return globalScope
	}
	return p
}

// Lookup returns the row of key as this instance has read the table: of
// table partition partition (the input record's) when co-partitioned, of
// the whole table when global. ok is false when the key has no row. The
// value is a copy.
func (t *Table) Lookup(partition int32, key []byte) (value []byte, ok bool, err error) {
	if e := t.failed.Load(); e != nil {
		return nil, false, *e
	}
	pre, ready := (*t.ready.Load())[t.scope(partition)]
	if !ready {
		return nil, false, fmt.Errorf("%w: %s/%d", ErrTableNotReady, t.o.Topic, partition)
	}
	v, closer, err := t.db.db.Get(dataKey(pre, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, t.db.checked(fmt.Errorf("state: reading table %s: %w", t.o.Topic, err))
	}
	defer closer.Close()
	return append(make([]byte, 0, len(v)), v...), true, nil
}

// Miss counts a record that found no row (processor_join_misses_total).
func (t *Table) Miss() { t.misses.Add(1) }

// row is one record of the table topic: a nil value deletes the key.
type row struct {
	key, value []byte
}

// rows returns the data records of recs as rows, their values decoded.
func (t *Table) rows(recs []*kgo.Record) []row {
	out := make([]row, 0, len(recs))
	for _, r := range recs {
		if r.Attrs.IsControl() {
			continue
		}
		v := r.Value
		if v != nil && t.o.Decode != nil {
			d, err := t.o.Decode(v)
			if err != nil {
				if t.bad.Add(1) == 1 {
					t.log.Warn("a table row does not decode; rows that do not are left out", "table", t.o.Topic,
						"partition", r.Partition, "offset", r.Offset, "err", err.Error())
				}
				continue
			}
			v = d
		}
		out = append(out, row{key: r.Key, value: v})
	}
	return out
}

// apply writes rows of partition p and its checkpoint next in one batch,
// keeping the scope's counts exact; sync says whether the batch must be
// on disk when apply returns.
func (t *Table) apply(p int32, rows []row, next int64, sync bool) error {
	scope := t.scope(p)
	pre := part{t.o.Topic, scope}.prefix()
	b := t.db.db.NewIndexedBatch()
	defer b.Close()
	t.mu.Lock()
	st := t.stats[scope]
	t.mu.Unlock()
	for _, r := range rows {
		dk := dataKey(pre, r.key)
		old, closer, err := b.Get(dk)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
		case err != nil:
			return t.db.checked(fmt.Errorf("state: reading table %s: %w", t.o.Topic, err))
		default:
			st.keys--
			st.bytes -= int64(len(r.key) + len(old))
			closer.Close()
		}
		if r.value == nil {
			_ = b.Delete(dk, nil)
			continue
		}
		_ = b.Set(dk, r.value, nil)
		st.keys++
		st.bytes += int64(len(r.key) + len(r.value))
	}
	var cp [24]byte
	binary.BigEndian.PutUint64(cp[:], uint64(next))
	copy(cp[8:], t.id[:])
	_ = b.Set(append(part{t.o.Topic, p}.prefix(), kindCheckpoint), cp[:], nil)
	var sv [16]byte
	binary.BigEndian.PutUint64(sv[:], uint64(st.keys))
	binary.BigEndian.PutUint64(sv[8:], uint64(st.bytes))
	_ = b.Set(append(part{t.o.Topic, scope}.prefix(), kindStats), sv[:], nil)
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	if err := b.Commit(opt); err != nil {
		return t.db.checked(fmt.Errorf("state: writing table %s: %w", t.o.Topic, err))
	}
	t.db.boundWAL()
	t.mu.Lock()
	t.stats[scope] = st
	if tp := t.parts[p]; tp != nil {
		tp.st.cp, tp.st.hasCP = checkpoint{next: next, topicID: t.id}, true
		tp.restored += int64(len(rows))
	}
	t.mu.Unlock()
	return nil
}

// Close stops the follower and closes the local database. Calling it
// again does nothing.
func (t *Table) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	t.stop()
	if err := t.db.close(); err != nil {
		return fmt.Errorf("state: closing table %s: %w", t.o.Topic, err)
	}
	return nil
}

// follower keeps a table current: the restore's fetcher, reading the
// partitions kept from where the restore left them, without an end.
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// follow starts the follower at the positions plan's restore reached.
func (t *Table) follow(plan []*restoring) error {
	if len(plan) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(t.o.ClientOpts...)
	if err != nil {
		return fmt.Errorf("state: creating the follower of table %s: %w", t.o.Topic, err)
	}
	parts := make([]*restoring, 0, len(plan))
	for _, r := range plan {
		parts = append(parts, &restoring{p: r.p, id: r.id, leader: r.leader, pos: r.pos, end: math.MaxInt64})
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan struct{})}
	t.fol = f
	go func() {
		defer close(f.done)
		defer cl.Close()
		t.run(ctx, cl, parts)
	}()
	return nil
}

// run applies what the follower fetches until ctx ends. A failed fetch
// (the brokers unreachable for long, a partition moved) starts it again
// from where it was after a pause; a failure of the local store ends it,
// and lookups fail from then on.
func (t *Table) run(ctx context.Context, cl *kgo.Client, parts []*restoring) {
	for ctx.Err() == nil {
		out := make(chan fetched, 1)
		f := &fetcher{cl: cl, adm: kadm.NewClient(cl), dec: kgo.DefaultDecompressor(), out: out, parts: parts, pos: map[*restoring]int64{}}
		for _, r := range parts {
			f.pos[r] = r.pos
		}
		fctx, cancel := context.WithCancel(ctx)
		go f.run(fctx)
		var failed, fetchErr error
		for x := range out {
			switch {
			case failed != nil || fetchErr != nil:
				continue // draining: the fetcher stops at its next send
			case x.err != nil:
				fetchErr = x.err
			case x.reset:
				failed = t.reset(x.r, x.next)
			default:
				failed = t.apply(x.r.p.partition, t.rows(x.recs), x.next, false)
				x.r.pos = x.next
				t.mu.Lock()
				if tp := t.parts[x.r.p.partition]; tp != nil {
					tp.stable = x.stable
				}
				t.mu.Unlock()
			}
			if failed != nil || fetchErr != nil {
				cancel()
			}
		}
		cancel()
		if failed != nil {
			t.log.Error("keeping the table current failed; lookups fail until the processor restarts", "table", t.o.Topic, "err", failed.Error())
			t.failed.Store(&failed)
			return
		}
		if fetchErr != nil && ctx.Err() == nil {
			t.log.Warn("reading the table topic failed; reading again", "table", t.o.Topic, "err", fetchErr.Error())
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// stop stops the follower, if one runs, and waits for it.
func (t *Table) stop() {
	if t.fol == nil {
		return
	}
	t.fol.cancel()
	<-t.fol.done
	t.fol = nil
}

// listTable returns the table topic's metadata, start and end offsets.
func listTable(ctx context.Context, adm *kadm.Client, topic string) (kadm.TopicDetail, kadm.ListedOffsets, kadm.ListedOffsets, error) {
	details, err := listed(ctx, adm, []string{topic})
	if err != nil {
		return kadm.TopicDetail{}, nil, nil, err
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return d, nil, nil, fmt.Errorf("state: table %s: not found: %v", topic, d.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return d, nil, nil, fmt.Errorf("state: listing the start offsets of table %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return d, nil, nil, fmt.Errorf("state: listing the end offsets of table %s: %w", topic, err)
	}
	return d, starts, ends, nil
}
