package pgsink

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// benchBatch is the rows per Commit of BenchmarkCommit, the processor's
// default PROCESSOR_MAX_RECORDS_PER_TXN.
const benchBatch = 10000

// benchRows are benchBatch rows of partition 0 with 100-byte JSON values.
func benchRows() []sink.Row {
	rs := make([]sink.Row, benchBatch)
	ts := time.Now()
	for i := range rs {
		v := fmt.Sprintf(`{"order_id":%d,"customer":"c-%05d","amount":%.2f,"items":[1,2,3],"note":"`, 10000000+i, i%10000, float64(i%100000)/100)
		for len(v) < 98 {
			v += "x"
		}
		v = v[:98] + `"}`
		rs[i] = sink.Row{Key: fmt.Appendf(nil, "order-%08d", i), Value: []byte(v), Timestamp: ts, Topic: "bench", Offset: int64(i)}
	}
	return rs
}

// BenchmarkCommit measures rows/s into the default table through Commit
// (a transaction with COPY and the offset update), against the ceiling:
// a bare pgx CopyFrom of the same rows, already encoded, on one
// connection. sink+index is Commit into a table with an index on the
// source coordinates, which the default table leaves out; statement is
// Commit in statement mode, an upsert per row.
func BenchmarkCommit(b *testing.B) {
	d := newTestDB(b)
	d.open(b, Options{}) // the default table, for bare_copy's copy of it
	rs := benchRows()
	if l := len(rs[0].Value); l != 100 || !storableJSON(rs[0].Value) {
		b.Fatalf("values of %d bytes (JSON: %v), want 100 bytes of JSON", l, storableJSON(rs[0].Value))
	}
	commit := func(b *testing.B, s *Sink) {
		ctx := testCtx(b)
		p := record.TopicPartition{Topic: "bench", Partition: 0}
		next := int64(-1)
		for b.Loop() {
			from := max(next, 0)
			if err := s.Commit(ctx, &sink.Batch{Rows: rs, Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: next, Next: from + benchBatch}}}); err != nil {
				b.Fatal(err)
			}
			next = from + benchBatch
		}
		b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("bare_copy", func(b *testing.B) {
		b.ReportAllocs()
		ctx := testCtx(b)
		d.exec(b, "CREATE TABLE bench_bare (LIKE processor_records INCLUDING DEFAULTS)")
		conn, err := pgx.Connect(ctx, d.URL)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		values := make([][]any, len(rs))
		for i, r := range rs {
			values[i] = []any{r.Topic, r.Partition, r.Offset, int32(r.Seq), r.Key, r.Value, nil, emptyHeaders, r.Timestamp}
		}
		for b.Loop() {
			n, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_bare"}, recordColumns, pgx.CopyFromRows(values))
			if err != nil || n != benchBatch {
				b.Fatalf("CopyFrom = %d, %v", n, err)
			}
		}
		b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("sink", func(b *testing.B) {
		b.ReportAllocs()
		commit(b, d.open(b, Options{Table: "bench_sink", Group: "bench_sink"}))
	})
	b.Run("sink+index", func(b *testing.B) {
		s := d.open(b, Options{Table: "bench_indexed", Group: "bench_indexed"})
		d.exec(b, "CREATE INDEX ON bench_indexed (src_topic, src_partition, src_offset)")
		commit(b, s)
	})
	b.Run("statement", func(b *testing.B) {
		b.ReportAllocs()
		d.exec(b, "CREATE TABLE bench_orders (order_id int PRIMARY KEY, doc jsonb NOT NULL)")
		commit(b, d.open(b, Options{Group: "bench_statement", Statement: `INSERT INTO bench_orders (order_id, doc)
			VALUES ((@value::jsonb->>'order_id')::int, @value::jsonb)
			ON CONFLICT (order_id) DO UPDATE SET doc = EXCLUDED.doc`}))
	})
}
