package pgsink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests run against a real PostgreSQL: the one whose URL is in
// PROCESSOR_TEST_POSTGRES_URL (make pg-up starts one and prints it; .ci/run
// starts it and exports it).
const urlVar = "PROCESSOR_TEST_POSTGRES_URL"

// testURL returns the test server's URL. Without one, a test fails in CI
// (which must start it) and is skipped elsewhere.
func testURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(urlVar)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: .ci/run must start integration/postgres/pg.sh (bash integration/postgres/pg.sh up) and export the URL it prints last", urlVar)
		}
		t.Skipf("no PostgreSQL: start one with `make pg-up` and export %s=<the URL it prints last>", urlVar)
	}
	return u
}

// testCtx is a context for one test's database work, cancelled at its end.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testDB is one test's corner of the server: a schema of its own (dropped
// at the end with all it holds) and a URL whose search_path is that
// schema, so that the sink's unqualified tables land there.
type testDB struct {
	url    string        // with search_path=schema
	schema string        // unquoted name, lower case
	admin  *pgxpool.Pool // on the same schema, for checks and setup
}

// newTestDB creates a schema named after the test.
func newTestDB(t testing.TB) *testDB {
	t.Helper()
	return newTestDBAt(t, testURL(t))
}

// newTestDBAt creates a schema named after the test on the server at
// base.
func newTestDBAt(t testing.TB, base string) *testDB {
	t.Helper()
	ctx := testCtx(t)
	schema := uniqueName(t, "t")
	admin, err := pgxpool.New(ctx, withParam(t, base, "search_path", schema))
	if err != nil {
		t.Fatalf("connecting to the test server: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		admin.Close()
		t.Fatalf("creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
		admin.Close()
	})
	return &testDB{url: withParam(t, base, "search_path", schema), schema: schema, admin: admin}
}

// open opens a Sink on the test's schema, closed at the test's end.
// Options without URL or Group get the test's.
func (d *testDB) open(t testing.TB, o Options) *Sink {
	t.Helper()
	if o.URL == "" {
		o.URL = d.url
	}
	if o.Group == "" {
		o.Group = "group-" + d.schema
	}
	s, err := Open(testCtx(t), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// count returns the number of rows of query.
func (d *testDB) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := d.admin.QueryRow(testCtx(t), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// exec runs SQL on the test's schema.
func (d *testDB) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := d.admin.Exec(testCtx(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// uniqueName is a lower-case identifier made of prefix, part of the
// test's name and a random suffix: unique across tests and runs.
func uniqueName(t testing.TB, prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return prefix + "_" + hex.EncodeToString(b[:]) + "_" + name
}

// withParam returns the URL u with the query parameter k set to v.
func withParam(t testing.TB, u, k, v string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", urlVar, err)
	}
	q := p.Query()
	q.Set(k, v)
	p.RawQuery = q.Encode()
	return p.String()
}

// rows makes n rows of partition p from offset from on, one output each,
// with JSON values.
func rows(topic string, p int32, from int64, n int) []Row {
	out := make([]Row, n)
	for i := range out {
		off := from + int64(i)
		out[i] = Row{
			Key:       []byte("k" + itoa(off)),
			Value:     []byte(`{"n":` + itoa(off) + `}`),
			Timestamp: time.Unix(1700000000+off, 0),
			Topic:     topic, Partition: p, Offset: off,
		}
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
