// Package pgtest gives tests a corner of a real PostgreSQL: the server
// whose URL is in PROCESSOR_TEST_POSTGRES_URL (make pg-up starts one and
// prints it; .ci/run starts it and exports it), and in it a schema of the
// test's own, dropped with all it holds when the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// URLVar is the variable holding the test server's URL.
const URLVar = "PROCESSOR_TEST_POSTGRES_URL"

// URL returns the test server's URL. Without one, the test fails in CI
// (CI set: .ci/run must start the server) and is skipped elsewhere.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(URLVar)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: .ci/run must start integration/postgres/pg.sh (bash integration/postgres/pg.sh up) and export the URL it prints last", URLVar)
		}
		t.Skipf("no PostgreSQL: start one with `make pg-up` and export %s=<the URL it prints last>", URLVar)
	}
	return u
}

// DB is one test's schema on the test server.
type DB struct {
	// URL reaches the server with search_path set to Schema, so that
	// unqualified tables land there.
	URL    string
	Schema string        // unquoted, lower case
	Admin  *pgxpool.Pool // on Schema, for setup and checks
}

// New creates a schema named after the test on the test server, dropped
// at its end.
func New(t testing.TB) *DB {
	t.Helper()
	return NewAt(t, URL(t))
}

// NewAt is New on the server at base (a test that starts a server of its
// own).
func NewAt(t testing.TB, base string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := Name(t, "t")
	u := WithParam(t, base, "search_path", schema)
	admin, err := pgxpool.New(ctx, u)
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
	return &DB{URL: u, Schema: schema, Admin: admin}
}

// Count returns the single integer query returns.
func (d *DB) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	if err := d.Admin.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Name is a lower-case identifier made of prefix, the end of the test's
// name and a random part: unique across tests and runs.
func Name(t testing.TB, prefix string) string {
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

// WithParam returns u with the query parameter k set to v.
func WithParam(t testing.TB, u, k, v string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("parsing %s: %v", URLVar, err)
	}
	q := p.Query()
	q.Set(k, v)
	p.RawQuery = q.Encode()
	return p.String()
}

// NewDatabase creates a database of the test's own on the test server,
// with the server encoding encoding (LATIN1, SQL_ASCII, ...), dropped at
// the test's end, for what depends on the encoding; the tests' user must
// be allowed to create databases. Its DB's Schema is public.
func NewDatabase(t testing.TB, encoding string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := URL(t)
	name := Name(t, "d")
	server, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to the test server: %v", err)
	}
	defer server.Close(context.Background())
	q := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE template0 ENCODING '" + encoding + "' LC_COLLATE 'C' LC_CTYPE 'C'"
	if _, err := server.Exec(ctx, q); err != nil {
		t.Skipf("cannot create a %s database on the test server: %v", encoding, err)
	}
	p, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parsing %s: %v", URLVar, err)
	}
	p.Path = "/" + name
	u := WithParam(t, p.String(), "client_encoding", "UTF8")
	admin, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("connecting to database %s: %v", name, err)
	}
	t.Cleanup(func() {
		admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("dropping database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	return &DB{URL: u, Schema: "public", Admin: admin}
}
