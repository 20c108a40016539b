package binaries

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/pgtest"
)

// billingDir is the example TestBillingExample runs: its settings, jq
// program, statement, schema and audit are read from there, so that the
// test checks what the example ships.
const billingDir = "../../examples/billing"

// The crash drill of examples/billing/README.md, with its figures.
const (
	billingOrders = 20_000          // loadgen -records
	billingRate   = 2_000           // loadgen -rate: the orders take 10 s to write
	billingKillAt = 3 * time.Second // the processor is SIGKILLed this long after it starts
)

// The example end to end, as its README's crash drill runs it: the
// devbroker, loadgen writing 20,000 orders, and the processor with
// billing.env, invoice.jq and invoice.sql writing into a schema of the
// test's own made from schema.sql; the processor is SIGKILLed mid-run and
// started again. Two bad orders are written among loadgen's. Afterwards:
//   - exactly one invoice per order o-0 ... o-19999, each from that
//     order's own input record, with the amount loadgen wrote and the tax
//     and total the jq program computes;
//   - the two bad orders are dead letters, from their input records;
//   - audit.sql adds up (consumed = invoices + dead letters);
//   - the stored offsets are the input's end offsets, partition by
//     partition;
//   - the statement committed once per order: a BEFORE INSERT trigger of
//     the test's counts its committed runs, which ON CONFLICT DO NOTHING
//     would hide, so a committed input processed again after the restart
//     would show as a second run.
func TestBillingExample(t *testing.T) {
	db := pgtest.New(t)
	itest.Binary(t) // builds every command into BinDir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	env := billingEnv(t)
	group, topic := itest.EnvValue(t, env, "PROCESSOR_GROUP"), itest.EnvValue(t, env, "PROCESSOR_INPUT_TOPICS")
	if _, err := db.Admin.Exec(ctx, billingFile(t, "schema.sql")); err != nil {
		t.Fatalf("schema.sql: %v", err)
	}
	if _, err := db.Admin.Exec(ctx, `
CREATE TABLE statement_runs (order_id text NOT NULL);
CREATE FUNCTION note_statement_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO statement_runs VALUES (NEW.order_id);
	RETURN NEW;
END $$;
CREATE TRIGGER note_statement_run BEFORE INSERT ON invoices
	FOR EACH ROW EXECUTE FUNCTION note_statement_run();`); err != nil {
		t.Fatalf("the trigger counting the statement's runs: %v", err)
	}

	broker := itest.FreeAddr(t)
	itest.BillingCommand(t, "devbroker", "-addr", broker, "-dir", t.TempDir())
	loadgen := itest.BillingCommand(t, "loadgen", "-brokers", broker, "-topic", topic,
		"-records", strconv.Itoa(billingOrders), "-rate", strconv.Itoa(billingRate), "-wait", "30s")
	// What the test adds to billing.env's settings (Extra): none of it is
	// a variable billing.env sets, which would win.
	inst := launch.Instance{
		Brokers:    []string{broker},
		InstanceID: group + "-1",
		Settings: map[string]string{
			"PROCESSOR_POSTGRES_URL":       db.URL,
			"PROCESSOR_JQ_EXPR":            billingFile(t, "invoice.jq"),
			"PROCESSOR_POSTGRES_STATEMENT": billingFile(t, "invoice.sql"),
		},
		LogFormat:        "text",
		HTTPAddr:         "127.0.0.1:0",
		ProgressInterval: 100 * time.Millisecond,
		Extra:            env,
	}
	invoices := func() int { return db.Count(t, "SELECT count(*)::int FROM invoices") }

	p1 := itest.RunBinary(t, "processor-1", inst)
	started := time.Now()
	itest.WaitFor(t, 30*time.Second, "the first processor's first commit", func() bool { return !p1.CommittedAt().IsZero() })

	// Two bad orders among loadgen's: the jq program fails them.
	tg := itest.NewTarget(t, "devbroker", []string{broker})
	badOrders := []string{`{"order_id":"bad-1","customer":"c","amount_cents":-5}`, `{"order_id":`}
	cl, err := kgo.NewClient(tg.ClientOpts(kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range badOrders {
		r := &kgo.Record{Key: []byte("bad-" + strconv.Itoa(i)), Value: []byte(v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("writing a bad order: %v", err)
		}
	}
	cl.Close()

	time.Sleep(time.Until(started.Add(billingKillAt)))
	p1.Kill(t)
	atKill := invoices()
	t.Logf("SIGKILL %s after start, with %d of %d orders invoiced", time.Since(started).Round(10*time.Millisecond), atKill, billingOrders)
	if atKill == 0 || atKill >= billingOrders {
		t.Fatalf("%d of %d orders invoiced at the SIGKILL; the drill needs it midway", atKill, billingOrders)
	}

	p2 := itest.RunBinary(t, "processor-2", inst)
	restarted := time.Now()
	select {
	case <-loadgen.Done:
		if loadgen.Err != nil {
			t.Fatalf("loadgen: %v\n%s", loadgen.Err, loadgen.Logs.String())
		}
	case <-time.After(itest.LoadgenTimeout):
		t.Fatalf("loadgen did not finish within %s", itest.LoadgenTimeout)
	}
	want := billingOrders + len(badOrders)
	consumed := func() int {
		return db.Count(t, `SELECT coalesce(sum(next_offset), 0)::int FROM processor_offsets WHERE "group" = $1 AND topic = $2`, group, topic)
	}
	deadline := time.Now().Add(30 * time.Second)
	for consumed() < want {
		select {
		case <-p2.Done:
			t.Fatalf("the restarted processor exited: %v", p2.Err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %d of %d input records consumed, %d invoices", consumed(), want, invoices())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("all %d input records consumed %s after the restart", want, time.Since(restarted).Round(10*time.Millisecond))
	p2.Terminate(t)

	// The stored offsets are the input's end, partition by partition.
	ends, err := tg.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int32]int64{}
	rows, err := db.Admin.Query(ctx, `SELECT "partition", next_offset FROM processor_offsets WHERE "group" = $1 AND topic = $2`, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p int32
		var next int64
		if err := rows.Scan(&p, &next); err != nil {
			t.Fatal(err)
		}
		stored[p] = next
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	partitions := 0
	ends.Each(func(o kadm.ListedOffset) {
		partitions++
		if o.Err != nil {
			t.Errorf("end offset of %s/%d: %v", topic, o.Partition, o.Err)
		} else if stored[o.Partition] != o.Offset {
			t.Errorf("partition %d: stored next offset %d, end offset %d", o.Partition, stored[o.Partition], o.Offset)
		}
	})
	if len(stored) != partitions {
		t.Errorf("processor_offsets has %d partitions of %s, the topic %d", len(stored), topic, partitions)
	}

	// Every input record is an invoice, or a dead letter, from that record.
	type source struct {
		topic     string
		partition int32
		offset    int64
	}
	type invoice struct {
		customer           string
		amount, tax, total int64
		src                source
	}
	got := map[string]invoice{}
	rows, err = db.Admin.Query(ctx, `SELECT order_id, customer, amount_cents, tax_cents, total_cents, source_topic, source_partition, source_offset FROM invoices`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var in invoice
		if err := rows.Scan(&id, &in.customer, &in.amount, &in.tax, &in.total, &in.src.topic, &in.src.partition, &in.src.offset); err != nil {
			t.Fatal(err)
		}
		got[id] = in
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	dead := map[source]string{}
	rows, err = db.Admin.Query(ctx, `SELECT src_topic, src_partition, src_offset, error FROM processor_dead_letters`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s source
		var msg string
		if err := rows.Scan(&s.topic, &s.partition, &s.offset, &msg); err != nil {
			t.Fatal(err)
		}
		dead[s] = msg
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	if len(got) != billingOrders {
		t.Errorf("%d invoices, want %d", len(got), billingOrders)
	}
	input := tg.ReadAll(t, topic, true)
	if len(input) != want {
		t.Fatalf("the input holds %d records, want %d", len(input), want)
	}
	seen := map[string]bool{}
	for _, r := range input {
		src := source{r.Topic, r.Partition, r.Offset}
		var o struct {
			OrderID  string `json:"order_id"`
			Customer string `json:"customer"`
			Amount   int64  `json:"amount_cents"`
			Seq      int64  `json:"seq"`
		}
		if json.Unmarshal(r.Value, &o) != nil || !strings.HasPrefix(o.OrderID, "o-") {
			if msg, ok := dead[src]; !ok {
				t.Errorf("bad order %s at %v is not a dead letter", r.Value, src)
			} else if msg == "" {
				t.Errorf("the dead letter of %s at %v has no error", r.Value, src)
			}
			continue
		}
		seen[o.OrderID] = true
		in, ok := got[o.OrderID]
		if !ok {
			t.Errorf("order %s (at %v) has no invoice", o.OrderID, src)
			continue
		}
		// The jq program's tax: 20% of the amount, rounded to the cent.
		tax := (o.Amount*20 + 50) / 100
		if in.src != src || in.customer != o.Customer || in.amount != o.Amount || in.tax != tax || in.total != o.Amount+tax {
			t.Errorf("order %s at %v (%s, %d cents): invoice %+v, want tax %d and total %d", o.OrderID, src, o.Customer, o.Amount, in, tax, o.Amount+tax)
		}
	}
	for n := range billingOrders {
		if id := "o-" + strconv.Itoa(n); !seen[id] {
			t.Errorf("order %s is not in the input", id)
		}
	}
	if len(dead) != len(badOrders) {
		t.Errorf("%d dead letters, want %d: %v", len(dead), len(badOrders), dead)
	}
	// Two orders whose figures are known, against the arithmetic above:
	// loadgen's o-1 is 8019 cents (100 + 7919), o-17 44723.
	for id, w := range map[string][3]int64{"o-1": {8019, 1604, 9623}, "o-17": {44723, 8945, 53668}} {
		if in := got[id]; [3]int64{in.amount, in.tax, in.total} != w {
			t.Errorf("invoice %s: amount, tax, total %d, %d, %d; want %v", id, in.amount, in.tax, in.total, w)
		}
	}

	// The statement committed once per order.
	if runs, orders := db.Count(t, "SELECT count(*)::int FROM statement_runs"), db.Count(t, "SELECT count(DISTINCT order_id)::int FROM statement_runs"); runs != billingOrders || orders != billingOrders {
		t.Errorf("the statement committed %d runs for %d orders, want one for each of %d: a committed input was processed again", runs, orders, billingOrders)
	}

	// The README's audit.
	var a struct{ consumed, invoices, dead, unaccounted, twice, amount, tax, total, wrong int64 }
	if err := db.Admin.QueryRow(ctx, billingFile(t, "audit.sql")).Scan(&a.consumed, &a.invoices, &a.dead, &a.unaccounted, &a.twice, &a.amount, &a.tax, &a.total, &a.wrong); err != nil {
		t.Fatalf("audit.sql: %v", err)
	}
	var amount, tax int64
	for _, in := range got {
		amount, tax = amount+in.amount, tax+in.tax
	}
	wantAudit := a
	wantAudit.consumed, wantAudit.invoices, wantAudit.dead, wantAudit.unaccounted, wantAudit.twice = int64(want), billingOrders, int64(len(badOrders)), 0, 0
	wantAudit.amount, wantAudit.tax, wantAudit.total, wantAudit.wrong = amount, tax, amount+tax, 0
	if a != wantAudit {
		t.Errorf("audit.sql says %+v, want %+v", a, wantAudit)
	}
}

// billingFile returns the content of a file of the example.
func billingFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(billingDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// billingEnv returns the VAR=value lines of the example's billing.env.
func billingEnv(t *testing.T) []string {
	t.Helper()
	return itest.EnvLines(t, "billing.env", billingFile(t, "billing.env"))
}
