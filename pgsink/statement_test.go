package pgsink

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// invoicesStatement upserts one invoice per order: the same input written
// twice (a replay, or two outputs of one order) leaves one row.
const invoicesStatement = `INSERT INTO invoices (order_id, amount, doc, customer, key, src, ts)
VALUES ((@value::jsonb->>'order_id')::int, (@value::jsonb->>'amount')::numeric, @value::jsonb,
        @header_customer, @key_text, @topic || '/' || @partition || '@' || @offset || '#' || @seq, @timestamp)
ON CONFLICT (order_id) DO UPDATE
SET amount = EXCLUDED.amount, doc = EXCLUDED.doc, src = EXCLUDED.src, writes = invoices.writes + 1`

// invoices creates the user's table of the statement tests.
func invoices(t *testing.T, d *testDB) {
	d.exec(t, `CREATE TABLE invoices (
		order_id int PRIMARY KEY,
		amount numeric NOT NULL CHECK (amount >= 0),
		doc jsonb NOT NULL,
		customer text,
		key text,
		src text NOT NULL,
		ts timestamptz,
		writes int NOT NULL DEFAULT 1)`)
}

// order is an input row for invoicesStatement.
func order(off int64, value string) sink.Row {
	r := rows("orders", 0, off, 1)[0]
	r.Value = []byte(value)
	r.Headers = []kgo.RecordHeader{{Key: "customer", Value: []byte("c-" + itoa(off))}}
	return r
}

func TestStatementUpsert(t *testing.T) {
	d := newTestDB(t)
	invoices(t, d)
	s := d.open(t, Options{Statement: invoicesStatement})
	ctx := testCtx(t)
	p := record.TopicPartition{Topic: "orders", Partition: 0}
	batch := []sink.Row{
		order(0, `{"order_id": 1, "amount": 10.5}`),
		order(1, `{"order_id": 2, "amount": 3}`),
		order(2, `{"order_id": 1, "amount": 11}`), // the same order again, in the same batch
	}
	if err := s.Commit(ctx, &sink.Batch{Rows: batch, Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: -1, Next: 3}}}); err != nil {
		t.Fatal(err)
	}
	// The same inputs once more (as after a reset of the offsets).
	if err := s.Commit(ctx, &sink.Batch{Rows: batch, Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: 3, Next: 6}}}); err != nil {
		t.Fatal(err)
	}
	if n := d.Count(t, "SELECT count(*) FROM invoices"); n != 2 {
		t.Errorf("%d invoices, want 2 (one per order)", n)
	}
	var amount, customer, key, src string
	var writes int
	err := d.Admin.QueryRow(ctx, "SELECT amount::text, customer, key, src, writes FROM invoices WHERE order_id = 1").Scan(&amount, &customer, &key, &src, &writes)
	if err != nil {
		t.Fatal(err)
	}
	if amount != "11" || customer != "c-0" || key != "k0" || src != "orders/0@2#0" || writes != 4 {
		t.Errorf("order 1: amount %s, customer %s, key %s, src %s, writes %d; want 11, c-0, k0, orders/0@2#0, 4", amount, customer, key, src, writes)
	}
	if n := d.Count(t, "SELECT count(*) FROM invoices WHERE ts IS NOT NULL AND doc->>'order_id' IS NOT NULL"); n != 2 {
		t.Errorf("%d invoices with ts and doc, want 2", n)
	}
	// Statement mode has no records table.
	if n := d.Count(t, "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2", d.Schema, DefaultTable); n != 0 {
		t.Errorf("statement mode created %s", DefaultTable)
	}
}

func TestStatementRowError(t *testing.T) {
	d := newTestDB(t)
	invoices(t, d)
	m := NewMetrics(prometheus.NewRegistry())
	s := d.open(t, Options{Statement: invoicesStatement, Metrics: m})
	ctx := testCtx(t)
	p := record.TopicPartition{Topic: "orders", Partition: 0}
	if err := s.Commit(ctx, &sink.Batch{Rows: []sink.Row{order(0, `{"order_id": 1, "amount": 1}`)}, Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: -1, Next: 1}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		bad   string
		index int
		want  string
	}{
		{"constraint", `{"order_id": 2, "amount": -5}`, 1, "violates check constraint"},
		{"cast", `{"order_id": "two", "amount": 5}`, 2, "invalid input syntax"},
		{"not null", `{"order_id": 3}`, 0, "null value"},
		{"not JSON", `order 4, amount 5`, 1, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := []sink.Row{
				order(1, `{"order_id": 10, "amount": 1}`),
				order(2, `{"order_id": 11, "amount": 1}`),
				order(3, `{"order_id": 12, "amount": 1}`),
			}
			batch[tc.index] = order(int64(tc.index+1), tc.bad)
			err := s.Commit(ctx, &sink.Batch{
				Rows:        batch,
				DeadLetters: []sink.DeadLetter{{Row: order(9, "x"), Error: "e", Stage: "s"}},
				Offsets:     []sink.OffsetUpdate{{TopicPartition: p, Expected: 1, Next: 4}},
			})
			var re *sink.RowError
			if !errors.As(err, &re) || re.Index != tc.index || re.DeadLetter || !strings.Contains(err.Error(), tc.want) || Retriable(err) {
				t.Fatalf("Commit = %v, want a *sink.RowError for row %d saying %q", err, tc.index, tc.want)
			}
			if want := "orders/0@" + itoa(int64(tc.index+1)); !strings.Contains(err.Error(), want) {
				t.Errorf("%v does not name the input %s", err, want)
			}
			// Nothing of the batch: no invoice, no dead letter, no offset.
			if n := d.Count(t, "SELECT count(*) FROM invoices"); n != 1 {
				t.Errorf("%d invoices, want 1", n)
			}
			if n := d.Count(t, "SELECT count(*) FROM processor_dead_letters"); n != 0 {
				t.Errorf("%d dead letters, want 0", n)
			}
			if got, _ := s.Offsets(ctx, nil); got[p] != 1 {
				t.Errorf("offset %d, want 1", got[p])
			}
		})
	}
	if got := testutil.ToFloat64(m.Rollbacks.WithLabelValues(RollbackRow)); got != 4 {
		t.Errorf("rollbacks{row} = %v, want 4", got)
	}
	// The batch without the bad row commits.
	if err := s.Commit(ctx, &sink.Batch{Rows: []sink.Row{order(1, `{"order_id": 10, "amount": 1}`)}, Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: 1, Next: 4}}}); err != nil {
		t.Fatal(err)
	}
}
