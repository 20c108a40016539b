package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
)

// checkJoins refuses, before anything connects, what the chain's join
// stages cannot run with: a co-partitioned join at or after a
// repartition hop (its records are no longer of the input partition the
// table partition is kept for), and one table joined in both modes.
func checkJoins(chain *transform.Chain) error {
	at, _, hop := chain.Hop()
	modes := map[string]bool{}
	for _, j := range chain.Joins() {
		for _, r := range j.Joiner.JoinTables() {
			topic, global := r.Topic, r.Global
			mode := PluginVar(j.Entry.Plugin(), r.ModeSetting)
			if !global && hop && j.Index >= at {
				return &settings.Error{Var: mode, Value: "co_partitioned",
					Want: settings.Say("global for a table read after a stage that repartitions the records by a group key: co-partitioned, partition p of the table is joined with partition p of the input")}
			}
			if g, seen := modes[topic]; seen && g != global {
				return &settings.Error{Var: mode, Value: map[bool]string{true: "global", false: "co_partitioned"}[global],
					Want: settings.Say("the mode of the other stage reading table " + topic + ": a table is kept one way")}
			}
			modes[topic] = global
		}
	}
	return nil
}

// tables are the tables of a chain's join stages, open.
type tables struct {
	list []*state.Table
}

// close closes every table.
func (ts *tables) close() {
	for _, t := range ts.list {
		_ = t.Close()
	}
}

// pipelineTables are the tables as the pipeline's.
func (ts *tables) pipelineTables() []pipeline.Table {
	out := make([]pipeline.Table, 0, len(ts.list))
	for _, t := range ts.list {
		out = append(out, pipelineTable{t})
	}
	return out
}

// pipelineTable is a *state.Table as a pipeline.Table.
type pipelineTable struct{ t *state.Table }

// Restore implements pipeline.Table.
func (p pipelineTable) Restore(ctx context.Context, partitions []int32) error {
	return p.t.Restore(ctx, partitions)
}

// Status implements pipeline.Table.
func (p pipelineTable) Status() any { return p.t.Status() }

// joinPartitionsError is a co-partitioned table whose partition count is
// not an input topic's.
type joinPartitionsError struct {
	setting, table, input  string
	tableParts, inputParts int
}

func (e *joinPartitionsError) Error() string {
	return fmt.Sprintf("%s=co_partitioned: table %s has %d partitions and input topic %s has %d: a co-partitioned join needs the same partition count "+
		"(and the same partitioner and key); use %s=global, or a table with %d partitions", e.setting, e.table, e.tableParts, e.input, e.inputParts, e.setting, e.inputParts)
}

// openTables opens the tables the chains' join stages read, one per
// table topic, each in a directory of its own under PROCESSOR_STATE_DIR,
// and binds them to the stages; decode, when not nil, decodes the rows'
// values as inputs' are. A co-partitioned table whose partition count is
// not every input topic's is a *joinPartitionsError. The pipeline
// restores them on assignment.
func openTables(ctx context.Context, cfg *config.Config, conn kafkaConn, chains []*transform.Chain,
	decode func([]byte) ([]byte, error), promReg prometheus.Registerer, log *slog.Logger) (*tables, error) {
	joins := chains[0].Joins()
	ts := &tables{}
	if len(joins) == 0 {
		return ts, nil
	}
	if err := checkCoPartitioned(ctx, conn, cfg.InputTopics, joins); err != nil {
		return nil, err
	}
	met, err := state.NewTableMetrics(promReg)
	if err != nil {
		return nil, fmt.Errorf("registering the join metrics: %w", err)
	}
	byTopic := map[string]*state.Table{}
	for _, r := range tableRefs(joins) {
		topic, global := r.ref.Topic, r.ref.Global
		if byTopic[topic] != nil {
			continue
		}
		dir := filepath.Join(cfg.StateDir, "tables", topic)
		t, err := state.OpenTable(state.TableOptions{Dir: dir, Topic: topic, Global: global, ClientOpts: conn,
			Decode: decode, Logger: log, CacheBytes: int64(cfg.StateCacheBytes), OnFatal: exitOnStateFailure(log)})
		if err != nil {
			ts.close()
			return nil, fmt.Errorf("opening table %s in %s: %w", topic, dir, err)
		}
		byTopic[topic] = t
		ts.list = append(ts.list, t)
		met.Add(t)
	}
	for _, c := range chains {
		for _, j := range c.Joins() {
			for _, r := range j.Joiner.JoinTables() {
				j.Joiner.BindTable(r.Topic, byTopic[r.Topic])
			}
		}
	}
	return ts, nil
}

// checkCoPartitioned refuses a table topic that does not exist (a
// *settings.Error), and a co-partitioned one whose partition count is not
// every input topic's.
func checkCoPartitioned(ctx context.Context, conn kafkaConn, inputs []string, joins []transform.JoinStage) error {
	adm, err := conn.admin()
	if err != nil {
		return fmt.Errorf("creating the join's admin client: %w", err)
	}
	defer adm.Close()
	for _, r := range tableRefs(joins) {
		topic, global, plugin := r.ref.Topic, r.ref.Global, r.stage.Entry.Plugin()
		td, err := adm.ListTopics(ctx, append([]string{topic}, inputs...)...)
		if err != nil {
			return fmt.Errorf("reading the table topic %s: %w", topic, err)
		}
		tt, ok := td[topic]
		if !ok || errors.Is(tt.Err, kerr.UnknownTopicOrPartition) {
			return &settings.Error{Var: PluginVar(plugin, r.ref.TableSetting), Value: topic, Want: settings.Say("an existing topic")}
		}
		if tt.Err != nil {
			return fmt.Errorf("reading the table topic %s: %w", topic, tt.Err)
		}
		for _, in := range inputs {
			if global {
				break
			}
			it, ok := td[in]
			if ok && it.Err == nil && len(it.Partitions) != len(tt.Partitions) {
				return &joinPartitionsError{setting: PluginVar(plugin, r.ref.ModeSetting), table: topic, input: in,
					tableParts: len(tt.Partitions), inputParts: len(it.Partitions)}
			}
		}
	}
	return nil
}

// stageTable is one table a stage reads.
type stageTable struct {
	stage transform.JoinStage
	ref   transform.TableRef
}

// tableRefs lists the tables the stages read, in chain order.
func tableRefs(joins []transform.JoinStage) []stageTable {
	var out []stageTable
	for _, j := range joins {
		for _, r := range j.Joiner.JoinTables() {
			out = append(out, stageTable{j, r})
		}
	}
	return out
}
