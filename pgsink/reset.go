package pgsink

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/streamproc/processor/record"
)

// SetOffsets stores next offsets for the sink's group (`processor offsets
// reset`), inserting the rows that are missing, in one transaction:
// check runs after every row is written and locked, just before COMMIT,
// and its error rolls everything back. A processor of the group that
// commits at the same time waits on the rows' locks and then finds them
// moved: its conditional update fences it, and it resumes from the new
// offsets.
func (s *Sink) SetOffsets(ctx context.Context, to map[record.TopicPartition]int64, check func(context.Context) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgsink: resetting the offsets of group %q at %s: %w", s.group, s.target, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	b := &pgx.Batch{}
	for tp, next := range to {
		b.Queue(s.sqlSet, s.group, tp.Topic, tp.Partition, next)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgsink: resetting the offsets of group %q in %s at %s: %w", s.group, s.offName, s.target, err)
	}
	if err := check(ctx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgsink: committing the reset offsets of group %q at %s: %w", s.group, s.target, err)
	}
	return nil
}
