package pgsink

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Ending the sessions of stopped instances. The server ends a stopped
// instance's transaction by itself when it stopped between statements
// (idle_in_transaction_session_timeout) or its network went away
// (keepalives); an instance stopped in the middle of sending (a COPY's
// rows, a large batch) leaves the server waiting for the rest, which no
// timeout covers, and its transaction keeps the row locks of its
// partitions' offsets. The new owner of those partitions then waits on
// them at its first statement, the offsets update. watchLocks, run beside
// each commit, sees that wait and ends the sessions it waits on that
// cannot be a live instance's: of the same user, in a transaction older
// than any commit of the group may run (a live instance gives up at its
// deadline, and its driver closes the connection).

// lockPoll is how long a commit runs before, and then how often,
// watchLocks looks at what it waits on.
const lockPoll = time.Second

// reapAfter is how much older than this commit's own time budget a
// blocking transaction must be to be ended: room for a cancelled
// client's connection to reach the server.
const reapAfter = 2 * time.Second

// sqlReap ends the sessions that backend $1 waits on while it runs one
// of the offsets statements ($2): of the same user, with a transaction
// open for more than $3 seconds. It returns each one's pid,
// application_name and age, and whether it was ended.
const sqlReap = `SELECT b.pid, b.application_name, extract(epoch FROM now() - b.xact_start)::float8, pg_terminate_backend(b.pid)
FROM pg_stat_activity me
CROSS JOIN LATERAL unnest(pg_blocking_pids(me.pid)) AS blocker(pid)
JOIN pg_stat_activity b ON b.pid = blocker.pid
WHERE me.pid = $1 AND me.wait_event_type = 'Lock' AND me.query = ANY($2::text[])
  AND b.usename = current_user AND b.xact_start < now() - $3 * interval '1 second'`

// watchLocks watches the commit running on backend pid, whose deadline is
// ctx's, until stop is called.
func (s *Sink) watchLocks(ctx context.Context, pid uint32) (stop func()) {
	budget := time.Minute
	if d, ok := ctx.Deadline(); ok {
		budget = time.Until(d)
	}
	older := (budget + reapAfter).Seconds()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(lockPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				s.reap(ctx, pid, older)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// reap ends the sessions backend pid waits on for its offsets, as
// sqlReap says, and logs each.
func (s *Sink) reap(ctx context.Context, pid uint32, older float64) {
	rows, err := s.pool.Query(ctx, sqlReap, int32(pid), []string{s.sqlUpdate, s.sqlInsert}, older)
	if err != nil {
		return // the commit's own outcome says what is wrong
	}
	var bpid int32
	var app string
	var age float64
	var ended bool
	_, _ = pgx.ForEachRow(rows, []any{&bpid, &app, &age, &ended}, func() error {
		if ended {
			if m := s.metrics; m != nil {
				m.SessionsEnded.Inc()
			}
			s.log.Warn("ended the PostgreSQL session of a stopped instance that held this batch's partitions",
				"pid", bpid, "application_name", app, "transaction_age", time.Duration(age*float64(time.Second)).Round(time.Millisecond).String())
		} else {
			s.log.Warn("a PostgreSQL session of a stopped instance holds this batch's partitions and could not be ended (the user may end only its own sessions)",
				"pid", bpid, "application_name", app)
		}
		return nil
	})
}
