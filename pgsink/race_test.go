package pgsink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// TestTwoInstancesRace has two Sinks of one group (two processor
// instances that both believe they own a partition) commit the same
// offset range at once, round after round: exactly one wins each round,
// the other gets a *sink.FencedError, and no input's outputs are written twice.
func TestTwoInstancesRace(t *testing.T) {
	d := newTestDB(t)
	app := pgtest.Name(t, "app")
	u := pgtest.WithParam(t, d.URL, "application_name", app)
	a, b := d.open(t, Options{URL: u}), d.open(t, Options{URL: u})
	ctx := testCtx(t)
	p := record.TopicPartition{Topic: "in", Partition: 0}
	const rounds, per = 20, 5
	commitBoth := func(expected, next int64, before func()) [2]error {
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, s := range []*Sink{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs := rows("in", 0, max(expected, 0), per)
				for j := range rs {
					rs[j].Key = []byte(fmt.Sprintf("instance-%d", i))
				}
				<-start
				errs[i] = s.Commit(ctx, &sink.Batch{Rows: rs, Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: expected, Next: next}}})
			}()
		}
		if before != nil {
			before()
		}
		close(start)
		wg.Wait()
		return errs
	}
	check := func(round int, errs [2]error, next int64) {
		t.Helper()
		wins := 0
		for i, err := range errs {
			var fe *sink.FencedError
			switch {
			case err == nil:
				wins++
			case errors.As(err, &fe):
				if fe.Stored[p] != next {
					t.Errorf("round %d: instance %d fenced with stored %v, want %d", round, i, fe.Stored, next)
				}
			default:
				t.Fatalf("round %d: instance %d: %v", round, i, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d instances committed (errors %v), want exactly 1", round, wins, errs)
		}
	}
	expected := int64(-1)
	for round := range rounds {
		next := max(expected, 0) + per
		check(round, commitBoth(expected, next, nil), next)
		expected = next
	}
	// Once more with both surely inside their transactions at the same
	// time: a third session holds the partition's row until both wait on it.
	tx, err := d.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, `SELECT 1 FROM processor_offsets WHERE topic = 'in' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	next := expected + per
	released := make(chan error, 1)
	errs := commitBoth(expected, next, func() {
		go func() {
			// Both instances' UPDATEs queue behind the lock; then let go.
			deadline := time.Now().Add(10 * time.Second)
			for waiting := 0; waiting < 2; time.Sleep(10 * time.Millisecond) {
				err := d.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting)
				if err != nil || time.Now().After(deadline) {
					t.Errorf("the two instances did not both wait for the lock (%v)", err)
					break
				}
			}
			released <- tx.Commit(ctx)
		}()
	})
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	check(rounds, errs, next)

	if n := d.Count(t, "SELECT count(*) FROM processor_records"); n != (rounds+1)*per {
		t.Errorf("%d rows, want %d", n, (rounds+1)*per)
	}
	if n := d.Count(t, `SELECT count(*) FROM (SELECT 1 FROM processor_records
		GROUP BY src_topic, src_partition, src_offset, seq HAVING count(*) > 1) dup`); n != 0 {
		t.Errorf("%d inputs with their outputs written more than once", n)
	}
	if got, _ := a.Offsets(ctx, nil); got[p] != next {
		t.Errorf("stored offset %d, want %d", got[p], next)
	}
}
