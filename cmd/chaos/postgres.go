package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
)

// checkScript checks that script exists and controls the server of
// pgURL: its "url" command must name the same host and port, or pgrestart
// would restart a server the processors do not use.
func checkScript(script, pgURL string) error {
	if _, err := os.Stat(script); err != nil {
		return err
	}
	want, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return errors.New("-postgres-url is not a PostgreSQL URL")
	}
	out, err := exec.Command("bash", script, "url").Output()
	if err != nil {
		return fmt.Errorf("%s url: %w", script, err)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return fmt.Errorf("%s url printed nothing", script)
	}
	got, err := pgx.ParseConfig(lines[len(lines)-1])
	if err != nil {
		return fmt.Errorf("%s url printed no PostgreSQL URL", script)
	}
	if got.Host != want.Host || got.Port != want.Port {
		return fmt.Errorf("%s controls the server at %s:%d, not the one of -postgres-url (%s:%d); set PROCESSOR_PG_PORT and PROCESSOR_PG_DIR as for that server",
			script, got.Host, got.Port, want.Host, want.Port)
	}
	return nil
}

// openDatabase connects to -postgres-url and checks that it answers.
func (d *driver) openDatabase() (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(d.o.pgURL)
	if err != nil {
		return nil, errors.New("-postgres-url is not a PostgreSQL URL") // the parser's message may quote the password
	}
	cfg.MaxConns = 2
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// checkFresh fails when the run's tables or its group's stored offsets
// are already in the database: the names come from the seed, the tables
// are kept after a run, and a drill repeated with the same seed would
// audit the earlier run's rows together with its own.
func (d *driver) checkFresh() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tables, hasOffsets, offsets bool
	err := d.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL OR to_regclass($2) IS NOT NULL, to_regclass('processor_offsets') IS NOT NULL`,
		d.table, d.deadTable).Scan(&tables, &hasOffsets)
	if err == nil && hasOffsets {
		err = d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM processor_offsets WHERE "group" = $1)`, d.group).Scan(&offsets)
	}
	if err != nil {
		return fmt.Errorf("looking for tables and offsets left from an earlier run: %w", err)
	}
	if tables || offsets {
		return fmt.Errorf("the tables %s and %s or the stored offsets of group %s are left from an earlier run with seed %d: use another -seed, or drop them", d.table, d.deadTable, d.group, d.o.seed)
	}
	return nil
}

// storedOffsets returns the group's next offsets of the input partitions
// stored in processor_offsets, the truth of a run into PostgreSQL.
func (d *driver) storedOffsets(ctx context.Context) (map[int32]int64, error) {
	rows, err := d.pool.Query(ctx, `SELECT "partition", next_offset FROM processor_offsets WHERE "group" = $1 AND topic = $2`, d.group, d.in)
	if err != nil {
		return nil, fmt.Errorf("reading processor_offsets: %w", err)
	}
	out := map[int32]int64{}
	var p int32
	var next int64
	_, err = pgx.ForEachRow(rows, []any{&p, &next}, func() error {
		out[p] = next
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading processor_offsets: %w", err)
	}
	return out, nil
}

// restartPostgres is the pgrestart fault: the script stops the server
// with the next shutdown mode in turn and starts it again. Then it
// measures, in the background, how long the group takes to store an
// offset again (nothing is measured once the input is all consumed).
func (d *driver) restartPostgres() {
	mode := pgModes[d.applied["pgrestart"]%len(pgModes)]
	d.log.Info("restarting PostgreSQL", "mode", mode)
	began := time.Now()
	out, err := exec.Command("bash", d.o.pgScript, "restart", mode).CombinedOutput()
	up := time.Now()
	if err != nil {
		d.mu.Lock()
		d.unexpected = append(d.unexpected, fmt.Sprintf("%s restart %s: %v: %s", d.o.pgScript, mode, err, strings.TrimSpace(string(out))))
		d.mu.Unlock()
		d.log.Error("restarting PostgreSQL failed; starting it", "mode", mode, "err", err.Error())
		if out, err := exec.Command("bash", d.o.pgScript, "start").CombinedOutput(); err != nil {
			fatal(fmt.Errorf("%s start: %v\n%s", d.o.pgScript, err, out))
		}
		return
	}
	d.mu.Lock()
	d.pgRestarts[mode]++
	d.pgDowntimes = append(d.pgDowntimes, up.Sub(began))
	d.mu.Unlock()
	go func() {
		for deadline := up.Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var moved bool
			err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM processor_offsets WHERE "group" = $1 AND updated_at > $2)`, d.group, up).Scan(&moved)
			cancel()
			if err == nil && moved {
				d.mu.Lock()
				d.pgRecoveries = append(d.pgRecoveries, time.Since(up))
				d.mu.Unlock()
				return
			}
		}
	}()
}

// appName is the application_name of processor id's database sessions
// (a parameter of its PROCESSOR_POSTGRES_URL), by which pgfreeze finds
// them in pg_stat_activity.
func (d *driver) appName(id int) string { return fmt.Sprintf("%s-%d", d.group, id) }

// withAppName returns the URL u with application_name set to name, or u
// when it cannot be parsed (the processor then says what is wrong).
func withAppName(u, name string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := pu.Query()
	q.Set("application_name", name)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// slowFor is how long the pgslow fault makes every row slow.
const slowFor = 10 * time.Second

// slowPostgres is the pgslow fault: for slowFor, every row inserted into
// the run's table costs 5 ms more (a trigger that sleeps), so a batch
// of the backlog the other faults leave takes longer than the
// transaction timeout to commit. The batches must shrink to what commits
// in time; nothing is lost or written twice.
func (d *driver) slowPostgres() {
	fn, trig := pgx.Identifier{d.table + "_slow"}.Sanitize(), pgx.Identifier{"chaos_slow"}.Sanitize()
	table := pgx.Identifier{d.table}.Sanitize()
	exec := func(sql string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := d.pool.Exec(ctx, sql); err != nil {
			d.mu.Lock()
			d.unexpected = append(d.unexpected, fmt.Sprintf("pgslow: %s: %v", sql, err))
			d.mu.Unlock()
			return false
		}
		return true
	}
	if !exec(`CREATE OR REPLACE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.005); RETURN NEW; END $$`) ||
		!exec(`CREATE TRIGGER `+trig+` BEFORE INSERT ON `+table+` FOR EACH ROW EXECUTE FUNCTION `+fn+`()`) {
		return
	}
	d.log.Info("every row slow", "for", slowFor.String())
	time.Sleep(slowFor)
	exec(`DROP TRIGGER ` + trig + ` ON ` + table)
}

// freezeLimit bounds how long pgfreeze waits for the partitions of the
// instance it froze to be written by the others: the session timeout,
// the server's idle_in_transaction_session_timeout (the sink's 10 s), a
// commit's deadline and room for a loaded machine.
func (d *driver) freezeLimit() time.Duration {
	return d.o.sessionTimeout + 10*time.Second + d.o.txnTimeout + 30*time.Second
}

// freezePostgres is the pgfreeze fault: SIGSTOP an instance while its
// database transaction is open (its session seen in pg_stat_activity
// with a transaction under way), and keep it stopped until every
// partition that had input left at the freeze has been stored again, by
// the others, while it still sleeps: the server must end its transaction
// and release the partitions' row locks. How long that took is reported;
// not within freezeLimit is unexpected. Then SIGCONT: the zombie must be
// fenced.
func (d *driver) freezePostgres() {
	inst := d.pick()
	app := d.appName(inst.id)
	inTxn := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var n int
		err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL AND state <> 'idle'`, app).Scan(&n)
		return err == nil && n > 0
	}
	frozen := false
	for deadline := time.Now().Add(15 * time.Second); !frozen && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if inTxn() {
			_ = inst.proc.Signal(syscall.SIGSTOP)
			if frozen = inTxn(); !frozen {
				_ = inst.proc.Signal(syscall.SIGCONT)
			}
		}
	}
	if !frozen { // no transaction seen: freeze it all the same, as stop does
		d.log.Warn("no database transaction of the instance seen; freezing it between transactions", "processor", inst.id)
		_ = inst.proc.Signal(syscall.SIGSTOP)
	}
	at := time.Now()
	took, ok := d.othersWrite(at)
	_ = inst.proc.Signal(syscall.SIGCONT)
	d.log.Info("pgfreeze: woken", "processor", inst.id, "inside_transaction", frozen, "others_stored_all_after", took.String(), "in_time", ok)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case !ok:
		d.unexpected = append(d.unexpected, fmt.Sprintf("pgfreeze: the partitions of processor %d, frozen inside its transaction, were not all written by the others within %s", inst.id, d.freezeLimit()))
	case frozen:
		d.pgFreezes = append(d.pgFreezes, took)
	}
}

// othersWrite waits until every partition of the input whose stored
// offset was short of its end has been stored since at, and returns how
// long that took, or false after freezeLimit.
func (d *driver) othersWrite(at time.Time) (time.Duration, bool) {
	adm, closeFn, err := d.admin()
	if err != nil {
		return 0, false
	}
	defer closeFn()
	for deadline := at.Add(d.freezeLimit()); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, err := adm.ListEndOffsets(ctx, d.in)
		var rows pgx.Rows
		if err == nil {
			rows, err = d.pool.Query(ctx, `SELECT "partition", next_offset, updated_at FROM processor_offsets WHERE "group" = $1 AND topic = $2`, d.group, d.in)
		}
		moved := map[int32]bool{}
		if err == nil {
			var p int32
			var next int64
			var updated time.Time
			_, err = pgx.ForEachRow(rows, []any{&p, &next, &updated}, func() error {
				end, _ := ends.Lookup(d.in, p)
				moved[p] = updated.After(at) || next >= end.Offset
				return nil
			})
		}
		cancel()
		if err != nil {
			continue
		}
		all := true
		ends.Each(func(o kadm.ListedOffset) { all = all && moved[o.Partition] })
		if all {
			return time.Since(at), true
		}
	}
	return 0, false
}
