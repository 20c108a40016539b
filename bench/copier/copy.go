package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// copier copies polled records to the output topic in transactions.
type copier struct {
	s      *kgo.GroupTransactSession
	out    string
	failed atomic.Pointer[error] // the first failed produce of the open transaction
}

// promise notes the first produce that failed.
func (cp *copier) promise(_ *kgo.Record, err error) {
	if err != nil {
		cp.failed.CompareAndSwap(nil, &err)
	}
}

// transaction polls and copies until deadline (or ctx's end), then ends
// the transaction: committed with the consumed offsets, or aborted when a
// produce failed. Nothing polled: no transaction. An error is fatal.
func (cp *copier) transaction(ctx context.Context, deadline time.Time) error {
	began := false
	for ctx.Err() == nil && time.Now().Before(deadline) {
		// At most 10,000 records a poll, so that the deadline is
		// checked between polls: on a backlog, one poll could
		// otherwise return everything fetched so far, hundreds of
		// megabytes, and hold the transaction open far longer.
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := cp.s.PollRecords(pctx, 10_000)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "copier: fetching %s/%d: %v\n", t, p, err)
			}
		})
		if fs.NumRecords() == 0 {
			continue
		}
		if !began {
			if err := cp.s.Begin(); err != nil {
				return fmt.Errorf("beginning a transaction: %w", err)
			}
			began = true
		}
		fs.EachRecord(func(r *kgo.Record) {
			r.Topic = cp.out
			cp.s.Produce(context.Background(), r, cp.promise)
		})
	}
	if !began {
		return nil
	}
	how := kgo.TryCommit
	if e := cp.failed.Swap(nil); e != nil {
		fmt.Fprintln(os.Stderr, "copier: a produce failed, aborting:", *e)
		how = kgo.TryAbort
	}
	ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cp.s.End(ectx, how); err != nil {
		return fmt.Errorf("ending a transaction: %w", err)
	}
	return nil
}
