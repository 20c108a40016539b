package pipeline

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Table is a table topic that a join stage of the chain reads (a
// *state.Table through a small adapter). The loop restores it as it
// restores the stores: between transactions, whenever the assignment
// changed, before any record of the partitions assigned runs, and the
// processor is not ready meanwhile. Co-partitioned, a table keeps the
// partitions of the input that Restore is given; global, all of its own.
type Table interface {
	// Restore brings the table up to date for the input partitions
	// assigned and keeps it current from then on.
	Restore(ctx context.Context, partitions []int32) error
	// Status is the table's status for /status, safe from any goroutine.
	Status() any
}

// hasState reports whether the loop restores anything on assignment:
// stores or tables.
func (st *stateLoop) hasState() bool { return st.s != nil || len(st.tables) > 0 }

// inputParts are the partitions assigned of the input topics (the
// repartition topic aside), sorted: the partitions the tables keep.
func (p *Pipeline) inputParts(assigned map[string][]int32) []int32 {
	var parts []int32
	for _, t := range p.o.InputTopics {
		if p.o.Repartition != nil && t == p.o.Repartition.Topic {
			continue
		}
		for _, q := range assigned[t] {
			if !slices.Contains(parts, q) {
				parts = append(parts, q)
			}
		}
	}
	slices.Sort(parts)
	return parts
}

// restoreTables restores every table for the input partitions assigned.
func (p *Pipeline) restoreTables(ctx context.Context, assigned map[string][]int32) error {
	p.st.tparts = nil
	if len(p.st.tables) == 0 {
		return nil
	}
	parts := p.inputParts(assigned)
	began := time.Now()
	for _, t := range p.st.tables {
		if err := t.Restore(ctx, parts); err != nil {
			return fmt.Errorf("restoring a join's table for input partitions %v: %w", parts, err)
		}
	}
	p.st.tparts = parts
	p.log.Info("tables ready", "partitions", fmt.Sprint(parts), "seconds", time.Since(began).Seconds())
	return nil
}

// tablesHold reports whether the tables were restored for the input
// partition of topic.
func (p *Pipeline) tablesHold(topic string, partition int32) bool {
	if len(p.st.tables) == 0 || p.o.Repartition != nil && topic == p.o.Repartition.Topic {
		return true
	}
	return slices.Contains(p.st.tparts, partition)
}

// tablesStatus is every table's status.
func (p *Pipeline) tablesStatus() []any {
	var out []any
	for _, t := range p.st.tables {
		out = append(out, t.Status())
	}
	return out
}
