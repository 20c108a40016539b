package pgsink

import (
	"context"
	"testing"

	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/sink/sinktest"
)

// refusedJSON is the value the conformance suite's tables refuse: a
// CHECK constraint of each, as a user's table refuses what breaks its
// rules.
const refusedJSON = `"refused"`

// The postgres sink does what every destination must (sinktest.Run), in
// both of its modes: rows copied into its own table, and rows written by
// the user's statement; in each, a CHECK constraint refuses one value.
func TestConformance(t *testing.T) {
	t.Run("Table", func(t *testing.T) {
		sinktest.Run(t, func(t testing.TB) sinktest.Target {
			d := newTestDB(t)
			s := d.open(t, Options{})
			d.exec(t, `ALTER TABLE processor_records ADD CONSTRAINT sinktest_refused CHECK (value IS DISTINCT FROM '`+refusedJSON+`'::jsonb)`)
			d.refuseDeadLetters(t)
			return sinktest.Target{Sink: s, Refused: []byte(refusedJSON), Written: d.written(`SELECT src_topic, src_partition, src_offset, seq, key,
				coalesce(convert_to(value::text, 'UTF8'), value_bytes) FROM processor_records`)}
		})
	})
	t.Run("Statement", func(t *testing.T) {
		sinktest.Run(t, func(t testing.TB) sinktest.Target {
			d := newTestDB(t)
			d.exec(t, `CREATE TABLE sinktest_rows (topic text NOT NULL, part int NOT NULL, off bigint NOT NULL, seq int NOT NULL,
				key bytea, value text CHECK (value <> '`+refusedJSON+`'))`)
			s := d.open(t, Options{Statement: `INSERT INTO sinktest_rows VALUES (@topic, @partition, @offset, @seq, @key, @value_text)`})
			d.refuseDeadLetters(t)
			return sinktest.Target{Sink: s, Refused: []byte(refusedJSON), Written: d.written(`SELECT topic, part, off, seq, key,
				convert_to(value, 'UTF8') FROM sinktest_rows`)}
		})
	})
}

// refuseDeadLetters makes the dead-letter table refuse refusedJSON.
func (d *testDB) refuseDeadLetters(t testing.TB) {
	t.Helper()
	d.exec(t, `ALTER TABLE processor_dead_letters ADD CONSTRAINT sinktest_refused CHECK (value IS DISTINCT FROM convert_to('`+refusedJSON+`', 'UTF8'))`)
}

// written reads the rows back with rowsSQL (topic, partition, offset,
// seq, key, value), and the dead letters from the sink's table.
func (d *testDB) written(rowsSQL string) func(ctx context.Context) ([]sink.Row, []sink.DeadLetter, error) {
	return func(ctx context.Context) ([]sink.Row, []sink.DeadLetter, error) {
		var rows []sink.Row
		res, err := d.Admin.Query(ctx, rowsSQL)
		if err != nil {
			return nil, nil, err
		}
		for res.Next() {
			var r sink.Row
			if err := res.Scan(&r.Topic, &r.Partition, &r.Offset, &r.Seq, &r.Key, &r.Value); err != nil {
				res.Close()
				return nil, nil, err
			}
			rows = append(rows, r)
		}
		if res.Close(); res.Err() != nil {
			return nil, nil, res.Err()
		}
		var dead []sink.DeadLetter
		res, err = d.Admin.Query(ctx, `SELECT src_topic, src_partition, src_offset, key, value, error, stage FROM processor_dead_letters`)
		if err != nil {
			return nil, nil, err
		}
		defer res.Close()
		for res.Next() {
			var r sink.DeadLetter
			if err := res.Scan(&r.Topic, &r.Partition, &r.Offset, &r.Key, &r.Value, &r.Error, &r.Stage); err != nil {
				return nil, nil, err
			}
			dead = append(dead, r)
		}
		return rows, dead, res.Err()
	}
}
