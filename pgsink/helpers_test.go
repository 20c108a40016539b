package pgsink

import (
	"context"
	neturl "net/url"
	"strconv"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/sink"
)

// The tests run against a real PostgreSQL (internal/testkit/pgtest): the one whose
// URL is in PROCESSOR_TEST_POSTGRES_URL, each test in a schema of its own.

// testCtx is a context for one test's database work, cancelled at its end.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testDB is one test's schema (pgtest.DB: URL with search_path=Schema,
// Schema, Admin, Count).
type testDB struct{ *pgtest.DB }

// newTestDB creates a schema named after the test on the test server.
func newTestDB(t testing.TB) *testDB {
	t.Helper()
	return &testDB{pgtest.New(t)}
}

// open opens a Sink on the test's schema, closed at the test's end.
// Options without URL or Group get the test's.
func (d *testDB) open(t testing.TB, o Options) *Sink {
	t.Helper()
	if o.URL == "" {
		o.URL = d.URL
	}
	if o.Group == "" {
		o.Group = "group-" + d.Schema
	}
	s, err := Open(testCtx(t), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// exec runs SQL on the test's schema.
func (d *testDB) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := d.Admin.Exec(testCtx(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// rows makes n rows of partition p from offset from on, one output each,
// with JSON values.
func rows(topic string, p int32, from int64, n int) []sink.Row {
	out := make([]sink.Row, n)
	for i := range out {
		off := from + int64(i)
		out[i] = sink.Row{
			Key:       []byte("k" + itoa(off)),
			Value:     []byte(`{"n":` + itoa(off) + `}`),
			Timestamp: time.Unix(1700000000+off, 0),
			Topic:     topic, Partition: p, Offset: off,
		}
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// writer makes a login role that may only write the sink's default tables
// (made beforehand by an Open as the test's superuser) and returns it with
// the test server's URL logging in as it. The role is dropped when the
// test ends.
func (d *testDB) writer(t *testing.T) (role, url string) {
	t.Helper()
	role = pgtest.Name(t, "r")
	d.exec(t, "CREATE ROLE "+role+" LOGIN PASSWORD 'writer-pw'")
	t.Cleanup(func() { d.exec(t, "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	d.exec(t, "GRANT USAGE ON SCHEMA "+d.Schema+" TO "+role)
	d.exec(t, "GRANT SELECT, INSERT, UPDATE ON processor_offsets TO "+role)
	d.exec(t, "GRANT INSERT ON processor_records, processor_dead_letters TO "+role)
	u, err := neturl.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(role, "writer-pw")
	return role, u.String()
}
