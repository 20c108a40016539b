package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
