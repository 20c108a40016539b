package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
)

// stateError names the setting to change when the pipeline refuses a
// stateful chain (a *pipeline.StateError): the stores are kept in Kafka
// (pipeline.Changelogs), behind at most one repartition hop.
func stateError(cfg *config.Config, e *pipeline.StateError) error {
	what := "with a stateful transform (stores " + strings.Join(e.Stores, ", ") + ")"
	say := func(v, value, want string) error {
		return &settings.Error{Var: v, Value: value, Want: settings.Say(want)}
	}
	switch e.Rule {
	case pipeline.StateReplay:
		return say(config.EnvName("TRANSFORMS"), strings.TrimSpace(cfg.Transforms[0]),
			"a chain without state: a stateful chain keeps its state by input partition, which dead letters do not have")
	case pipeline.StateHopSink:
		return say(config.EnvName("SINK"), cfg.Sink, "kafka "+what+": the chain repartitions its records through a Kafka topic in the transaction that commits their input, which a database sink's commit does not include")
	case pipeline.StateAtLeastOnce:
		return say(config.EnvName("GUARANTEE"), cfg.Guarantee, "exactly_once "+what+": at least once, the state would count replayed inputs twice")
	case pipeline.StateSink:
		return say(config.EnvName("SINK"), cfg.Sink, "kafka "+what+": the stores' changelogs are written in the Kafka transaction, which a database sink's commit does not include")
	case pipeline.StateInputs:
		return say(config.EnvName("INPUT_TOPICS"), strings.Join(cfg.InputTopics, ","), "one topic "+what+": partition p of each store is partition p of the input")
	case pipeline.StateHopClose:
		return say(PluginVar(e.Entry.Plugin(), e.Setting), e.Value,
			"unset for "+e.Entry.String()+", which runs after "+e.Hop.String()+" repartitions the records: emitting on close needs no hop in this release")
	case pipeline.StateSecondHop:
		return say(config.EnvName("TRANSFORMS"), strings.Join(cfg.Transforms, ","), "at most one repartition hop: "+e.Entry.String()+" keeps state after "+e.Hop.String()+
			", which repartitions the records by its own group key; run "+e.Entry.String()+" in a second processor that reads this one's output, or set "+
			PluginVar(e.Entry.Plugin(), "PARTITIONED_BY_KEY")+"=true if its records of one group key all share one of "+e.Hop.String()+"'s")
	case pipeline.StateKeyOrder:
		return say(config.EnvName("ORDERING"), cfg.Ordering, "partition for this chain: "+e.Entry.String()+" "+e.Why+", and key ordering runs records of different keys at once")
	}
	return e
}

// openState opens the local state store of a stateful chain and ensures
// its changelog topics, with the input topic's partition count; nil for a
// chain without state. A changelog that does not match is a
// *state.MismatchError.
func openState(ctx context.Context, cfg *config.Config, sec *security, brokers []string, chain *transform.Chain,
	promReg prometheus.Registerer, log *slog.Logger) (*state.Manager, error) {
	stores := chain.Stores()
	if len(stores) == 0 {
		return nil, nil
	}
	conn := dialConn(cfg, sec, brokers)
	m, err := state.Open(state.Options{Dir: cfg.StateDir, Group: cfg.Group, Stores: stores,
		ClientOpts: conn, Registerer: promReg, Logger: log, CacheBytes: int64(cfg.StateCacheBytes), OnFatal: exitOnStateFailure(log)})
	if err != nil {
		return nil, fmt.Errorf("opening the state store in %s: %w", cfg.StateDir, err)
	}
	if err := ensureChangelogs(ctx, m, conn, cfg.InputTopics); err != nil {
		_ = m.Close()
		return nil, err
	}
	return m, nil
}

// ensureChangelogs ensures m's changelogs with the inputs' partition
// count: the one input's, or with a repartition hop (which may read
// several) the largest, the repartition topic's.
func ensureChangelogs(ctx context.Context, m *state.Manager, conn kafkaConn, inputs []string) error {
	adm, err := conn.admin()
	if err != nil {
		return fmt.Errorf("creating the state's admin client: %w", err)
	}
	defer adm.Close()
	n, err := inputPartitions(ctx, adm, inputs)
	if err != nil {
		return err
	}
	if err := m.EnsureChangelogs(ctx, adm, n); err != nil {
		return fmt.Errorf("ensuring the state's changelog topics: %w", err)
	}
	return nil
}

// stateStores is a *state.Manager as the pipeline's State.
type stateStores struct{ m *state.Manager }

// Begin implements pipeline.State.
func (s stateStores) Begin() (pipeline.StateTxn, error) {
	t, err := s.m.Begin()
	if err != nil {
		return nil, err
	}
	return stateTxn{t}, nil
}

// Restore implements pipeline.State.
func (s stateStores) Restore(ctx context.Context, partitions []int32) error {
	return s.m.Restore(ctx, partitions)
}

// RestoreStores implements pipeline.StoreScoped.
func (s stateStores) RestoreStores(ctx context.Context, stores []string, partitions []int32) error {
	return s.m.RestoreStores(ctx, stores, partitions)
}

// RevokeStores implements pipeline.StoreScoped.
func (s stateStores) RevokeStores(stores []string, partitions []int32) {
	s.m.RevokeStores(stores, partitions)
}

// Revoke implements pipeline.State.
func (s stateStores) Revoke(partitions []int32) { s.m.Revoke(partitions) }

// Status implements pipeline.State.
func (s stateStores) Status() any { return s.m.Status() }

// Topics implements pipeline.State.
func (s stateStores) Topics() []string { return s.m.Topics() }

// Journal implements pipeline.State.
func (s stateStores) Journal(maxRecordBytes func(string) int) pipeline.StateJournal {
	return stateJournal{&state.Journal{MaxRecordBytes: maxRecordBytes}}
}

// stateJournal is a *state.Journal as the pipeline's StateJournal.
type stateJournal struct{ *state.Journal }

// Store implements pipeline.StateJournal.
func (j stateJournal) Store(t pipeline.StateTxn, name string, partition int32) (transform.Store, error) {
	return j.Journal.Store(t.(stateTxn).Txn, name, partition)
}

// stateTxn is a *state.Txn as the pipeline's StateTxn.
type stateTxn struct{ *state.Txn }

// Store implements pipeline.StateTxn.
func (t stateTxn) Store(name string, partition int32) (transform.Store, error) {
	return t.Txn.Store(name, partition)
}

// ExpireEach implements pipeline.StateTxn.
func (t stateTxn) ExpireEach(ctx context.Context, store string, partition int32, now time.Time, limit, maxBytes int,
	fn func(key, value []byte, expiry time.Time) error) (n, bytes int, err error) {
	return t.Txn.ExpireEach(ctx, store, partition, now, limit, maxBytes, func(x state.Expired) error {
		return fn(x.Key, x.Value, x.Expiry)
	})
}

// statePartitioner keeps the partition of the changelog records, which
// state sets, and partitions every other record as franz-go's default
// does.
func statePartitioner(m *state.Manager, rp *pipeline.Repartition) kgo.Opt {
	manual := m.Topics()
	if rp != nil { // the hop sets the partition of its group key
		manual = append(manual, rp.Topic)
	}
	return kgo.RecordPartitioner(state.Partitioner(kgo.UniformBytesPartitioner(64<<10, true, true, nil), manual))
}
