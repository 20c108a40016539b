// Package state keeps the keyed stores of stateful transforms exactly once.
//
// A store maps bytes to bytes and is partitioned like the input: the
// state of input partition p lives in partition p of the store's changelog
// topic, <group>-<store>-changelog (compacted), and in a local Pebble
// database under Options.Dir, which is a cache of the changelog that
// survives restarts.
//
// A transaction's writes stay in its Txn: reads see them, the changelog
// receives them, collapsed to one record per key (Txn.Records), inside the
// same Kafka transaction as the outputs and the consumed offsets, and the
// local database receives them only after that transaction committed
// (Txn.Commit), in one atomic batch with the checkpoint: the changelog
// offset the partition's local state reflects. The local database thus
// never holds uncommitted state and is never wiped after a crash: on
// assignment, Manager.Restore reads each partition's changelog from its
// checkpoint to the end (read_committed), so after a SIGKILL only the
// tail written since the last Commit is read again. A partition without a
// checkpoint, or with one the changelog cannot have written (ahead of its
// end, before its start, or of a topic since recreated), is rebuilt from
// the start of the changelog, its local keys wiped first.
//
// The order of calls for one transaction of the processing loop:
//
//	t, _ := m.Begin()                  // after the Kafka transaction began
//	t.Expire(ctx, store, p, now, n, b) // optional, before the workers run
//	s, _ := t.Store(store, p)          // per record, any worker
//	s.Get / s.Put / s.Delete           // different keys concurrently
//	for _, r := range t.Records() {    // once the workers are done
//	        produce(r)                 // into the same Kafka transaction
//	}
//	committed := end()                 // flush and end the Kafka transaction
//	if committed { t.Commit() } else { t.Abort() }
//
// and around rebalances: Manager.Restore for assigned partitions before
// any of their records is processed, Manager.Revoke for revoked or lost
// ones.
package state

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configure a Manager. Dir, Group and Stores are required.
type Options struct {
	// Dir is the directory of the local database, created if missing
	// (PROCESSOR_STATE_DIR, ./data/state by default, in the wiring). One
	// processor instance uses it at a time: Pebble locks it.
	Dir string
	// Group is the consumer group; it names the changelog topics.
	Group string
	// Stores are the names of the stores, unique, each a valid part of a
	// topic name ([a-zA-Z0-9._-]).
	Stores []string
	// ClientOpts are the options of the restore's client: the seed
	// brokers (kgo.SeedBrokers) and how to reach them (TLS, SASL). Restore
	// sends its own Fetch requests through it (read_committed, 1 MiB
	// each), so consumer options have no effect; it joins no group.
	ClientOpts []kgo.Opt
	// Registerer, when not nil, receives the state metrics:
	// processor_state_restore_records_total, processor_state_restore_seconds,
	// processor_state_rebuilds_total{store,reason},
	// processor_state_keys{store} and processor_state_bytes{store}.
	Registerer prometheus.Registerer
	// Logger receives a line per restored partition; nil logs nothing.
	Logger *slog.Logger
	// OnFatal receives the failure of the local store that Pebble cannot
	// go on after (a compaction that found a corrupt table, a MANIFEST it
	// cannot write), from whichever goroutine met it, and must end the
	// process: a *DirError when a rebuild will not fix it (a full or
	// read-only filesystem), any other error after the directory was
	// marked damaged, so that the next Open rebuilds it. Nil prints the
	// error and exits with status 1, as Pebble's own logger exits.
	OnFatal func(error)
	// RestoreBatch is how many changelog records Restore collapses into
	// one local batch with its checkpoint; 0 means 20,000. A larger batch
	// restores a little faster and holds more memory; a restore
	// interrupted between batches resumes from the last one written.
	RestoreBatch int
	// CacheBytes is the local database's block cache
	// (PROCESSOR_STATE_CACHE_BYTES), beside its memtables (up to 96 MiB);
	// 0 means DefaultCacheBytes. A read of a key the open transaction has
	// not touched is served from it or from disk: a cache smaller than the
	// tables' index and filter blocks makes every such read decode blocks
	// again.
	CacheBytes int64
}

// Errors of the Manager and its transactions.
var (
	// ErrNotRestored is returned by Txn.Store for a partition that is not
	// assigned or not yet restored: its records must wait for Restore.
	ErrNotRestored = errors.New("state: partition not restored")
	// ErrUnknownStore is returned for a store name not in Options.Stores.
	ErrUnknownStore = errors.New("state: unknown store")
	// ErrTxnOpen is returned by Begin while another Txn is neither
	// committed nor aborted.
	ErrTxnOpen = errors.New("state: a transaction is already open")
	// ErrTxnEnded is returned by a Txn's methods once it was committed or
	// aborted, and by its stores' writes once Records sealed it.
	ErrTxnEnded = errors.New("state: transaction sealed or ended")
)

// Manager owns the local database and the partitions of every store. Its
// methods are safe for concurrent use; one Txn is open at a time.
type Manager struct {
	opts   Options
	log    *slog.Logger
	db     *local
	topics map[string]string // store name -> changelog topic
	met    *metrics

	// wiped is why Open wiped the local store ("damaged", "layout"; ""
	// when it did not): the partitions it rebuilds are counted with it.
	wiped string

	mu       sync.RWMutex
	parts    map[part]*partInfo // known partitions, restored or not
	topicIDs map[string][16]byte
	open     *Txn
	closed   atomic.Bool
}

// Open opens (or creates) the local database in o.Dir. It does not
// contact Kafka: call EnsureChangelogs once and Restore on assignment.
//
// A damaged database (a table cut short or missing, an empty or corrupt
// MANIFEST, a directory marked damaged by an earlier failure: see
// damage.go) is wiped, logged, and opened empty: Restore rebuilds every
// partition from its changelog and counts it in
// processor_state_rebuilds_total{reason="damaged"}. A directory that
// cannot be used at all (not creatable or writable, a read-only or full
// filesystem) is a *DirError.
func Open(o Options) (*Manager, error) {
	if o.Dir == "" || o.Group == "" || len(o.Stores) == 0 {
		return nil, errors.New("state: Options.Dir, Group and Stores are required")
	}
	if o.RestoreBatch <= 0 {
		o.RestoreBatch = 20000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: o, log: o.Logger, topics: map[string]string{},
		parts: map[part]*partInfo{}, topicIDs: map[string][16]byte{}}
	for _, s := range o.Stores {
		if err := validName(s); err != nil {
			return nil, err
		}
		if _, dup := m.topics[s]; dup {
			return nil, fmt.Errorf("state: store %q named twice", s)
		}
		m.topics[s] = ChangelogTopic(o.Group, s)
	}
	db, wiped, err := openStore(o.Dir, o.CacheBytes, o.OnFatal)
	if err != nil {
		return nil, err
	}
	m.db, m.wiped = db, wiped.reason
	m.met = newMetrics(m)
	switch wiped.reason {
	case "layout":
		m.log.Warn("state: the local store was written by an older build in another key layout; it was wiped, and every partition is rebuilt from its changelog when restored (once, after an upgrade)",
			"dir", o.Dir, "detail", wiped.detail)
	case "damaged":
		m.log.Warn("state: the local store was damaged; it was wiped, and every partition is rebuilt from its changelog when restored",
			"dir", o.Dir, "damage", wiped.detail)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(m.met); err != nil {
			db.close()
			return nil, fmt.Errorf("state: registering the metrics: %w", err)
		}
	}
	return m, nil
}

// validName refuses a store name that cannot be part of a topic name.
func validName(s string) error {
	if s == "" || len(s) > 200 {
		return fmt.Errorf("state: store name %q: want 1 to 200 characters", s)
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0 {
		return fmt.Errorf("state: store name %q: want only letters, digits, '.', '_' and '-'", s)
	}
	return nil
}

// ChangelogTopic is the changelog topic of store in group:
// <group>-<store>-changelog.
func ChangelogTopic(group, store string) string {
	return group + "-" + store + "-changelog"
}

// Topics returns the changelog topics of the stores, in the order of
// Options.Stores, e.g. for Partitioner.
func (m *Manager) Topics() []string {
	out := make([]string, 0, len(m.opts.Stores))
	for _, s := range m.opts.Stores {
		out = append(out, m.topics[s])
	}
	return out
}

// partInfo is what the Manager knows of one partition of one store.
type partInfo struct {
	ready  bool      // restored, assigned: transactions may use it
	st     partState // persisted checkpoint and counts, as last written
	stream int64     // highest expiry time given to Expire, unix ns

	restoring bool    // a Restore is reading it
	restored  int64   // records read by the last (or current) restore
	from, end int64   // the offsets the last restore read from and to
	seconds   float64 // how long the last restore took
	rebuilt   bool    // whether the last restore started from scratch
}

// info returns the partInfo of p, created (not ready) if unknown. m.mu
// must be held for writing.
func (m *Manager) info(p part) *partInfo {
	pi := m.parts[p]
	if pi == nil {
		pi = &partInfo{}
		m.parts[p] = pi
	}
	return pi
}

// Revoke marks partitions of every store not restored: their local state
// stays on disk (a later Restore reads only the tail), but no transaction
// may use them until then. Call it for partitions revoked or lost, and
// for every partition after a transaction whose outcome is unknown.
func (m *Manager) Revoke(partitions []int32) { m.RevokeStores(m.opts.Stores, partitions) }

// RevokeStores is Revoke for some of the stores only (see RestoreStores).
func (m *Manager) RevokeStores(stores []string, partitions []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range stores {
		for _, p := range partitions {
			if pi := m.parts[part{m.topics[s], p}]; pi != nil {
				pi.ready = false
			}
		}
	}
}

// Close closes the local database. Transactions not committed are lost,
// which the changelog's transaction already decided. It unregisters the
// metrics. Calling it again does nothing.
func (m *Manager) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	if m.opts.Registerer != nil {
		m.opts.Registerer.Unregister(m.met)
	}
	if err := m.db.close(); err != nil {
		return fmt.Errorf("state: closing the local store: %w", err)
	}
	return nil
}
