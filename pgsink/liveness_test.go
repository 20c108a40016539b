package pgsink

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
)

// A server certificate that does not verify, at start: an unknown
// authority, a host name the certificate does not hold, an expired
// certificate. Each is a *settings.Error naming the URL (a configuration
// error through the sink's settings, exit 2, with one line naming sslmode,
// sslrootcert and where), never a server that is down. After a start that
// verified, a certificate that stops verifying (rotated on the server)
// fails commits with a retriable error saying so, and the first commit
// after the server's certificate is mended goes through.
func TestCertificateThatDoesNotVerify(t *testing.T) {
	srv := pgtest.StartServer(t)
	ca, other := pgtest.NewCA(t, "the database's CA"), pgtest.NewCA(t, "another CA")
	day := time.Now().Add(24 * time.Hour)
	good, goodKey := ca.ServerCert(t, day, "127.0.0.1", "localhost")
	verifying := pgtest.WithParam(t, pgtest.WithParam(t, srv.URL, "sslmode", "verify-full"), "sslrootcert", ca.File)
	ctx := testCtx(t)

	cases := []struct {
		name, want string
		cert       func() ([]byte, []byte)
	}{
		{"unknown authority", "authority", func() ([]byte, []byte) { return other.ServerCert(t, day, "127.0.0.1") }},
		{"host name", "not valid for host 127.0.0.1", func() ([]byte, []byte) { return ca.ServerCert(t, day, "db.example") }},
		{"expired", "expired", func() ([]byte, []byte) { return ca.ServerCert(t, time.Now().Add(-time.Hour), "127.0.0.1") }},
	}
	for _, c := range cases {
		cert, key := c.cert()
		srv.UseCertificate(t, cert, key)
		_, err := Open(ctx, Options{URL: verifying, Group: "tls"})
		var refused *settings.Error
		if !errors.As(err, &refused) || refused.Field != SettingURL || !refused.Secret || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "sslrootcert") || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s: Open: %v, want a *settings.Error of the URL saying %q, naming sslrootcert and the host", c.name, err, c.want)
		}
		_, _, err = openSettings(ctx, &Settings{URL: settings.Secret(verifying), Table: DefaultTable, DeadLetterTable: DefaultDeadLetterTable}, sink.Host{Group: "tls"})
		var se *settings.Error
		if !errors.As(err, &se) || se.Field != SettingURL || !strings.Contains(err.Error(), "sslmode") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: opened as the processor does: %v, want a one-line *settings.Error of %s naming sslmode", c.name, err, SettingURL)
		}
	}

	srv.UseCertificate(t, good, goodKey)
	s, err := Open(ctx, Options{URL: verifying, Group: "tls"})
	if err != nil {
		t.Fatalf("Open with the certificate verifying: %v", err)
	}
	defer s.Close()
	p := record.TopicPartition{Topic: "in", Partition: 0}
	commit := func(from, to int64) error {
		exp := from
		if from == 0 {
			exp = -1
		}
		return s.Commit(ctx, &sink.Batch{Rows: rows("in", 0, from, int(to-from)), Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: exp, Next: to}}})
	}
	if err := commit(0, 10); err != nil {
		t.Fatal(err)
	}
	// The server's certificate is replaced by one of another authority,
	// and the sink's connections end (a server restart would do both).
	bad, badKey := other.ServerCert(t, day, "127.0.0.1")
	srv.UseCertificate(t, bad, badKey)
	s.pool.Reset()
	err = commit(10, 20)
	if err == nil || !Retriable(err) || !strings.Contains(err.Error(), "authority") {
		t.Fatalf("Commit after the server's certificate changed: %v (retriable %v), want a retriable error about the authority", err, Retriable(err))
	}
	srv.UseCertificate(t, good, goodKey)
	if err := commit(10, 20); err != nil {
		t.Fatalf("Commit after the certificate was mended: %v", err)
	}
}

// A password rotated while running: the password file is read again for
// every new connection, so once the server's password changes and the old
// connections end, commits go on with the new one; a file that cannot be
// read keeps the last password.
func TestPasswordFileRotated(t *testing.T) {
	d := newTestDB(t)
	d.open(t, Options{Group: "rotate"}) // the tables, made by the test's superuser
	role, u := d.writer(t)
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("writer-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{URL: pgtest.WithParam(t, u, "search_path", d.Schema), Group: "rotate", Password: "writer-pw", PasswordFile: file,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))}
	ctx := testCtx(t)
	s, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := record.TopicPartition{Topic: "in", Partition: 0}
	commit := func(exp, from, to int64) error {
		return s.Commit(ctx, &sink.Batch{Rows: rows("in", 0, from, int(to-from)), Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: exp, Next: to}}})
	}
	if err := commit(-1, 0, 10); err != nil {
		t.Fatal(err)
	}
	d.exec(t, "ALTER ROLE "+role+" PASSWORD 'rotated-pw'")
	if err := os.WriteFile(file, []byte("rotated-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.pool.Reset() // the old connections end (a server restart, a pooler)
	if err := commit(10, 10, 20); err != nil {
		t.Fatalf("Commit after the password was rotated in the file: %v", err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	s.pool.Reset()
	if err := commit(20, 20, 30); err != nil {
		t.Fatalf("Commit with the password file gone (the last password still works): %v", err)
	}
}

// A commit whose deadline passes while the server cannot be reached (the
// network in between cut, so that connecting hangs) says it ran out of
// time, and after how long, not that the server refused: the deadline is
// the cause. The first commit after the network heals succeeds.
func TestCommitRanOutOfTime(t *testing.T) {
	d := newTestDB(t)
	d.open(t, Options{})
	proxy := pgtest.NewProxy(t, d.URL)
	s := d.open(t, Options{URL: proxy.URL(d.URL)})
	ctx := testCtx(t)
	p := record.TopicPartition{Topic: "in", Partition: 0}
	if err := s.Commit(ctx, &sink.Batch{Rows: rows("in", 0, 0, 5), Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: -1, Next: 5}}}); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	s.pool.Reset()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := s.Commit(cctx, &sink.Batch{Rows: rows("in", 0, 5, 5), Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: 5, Next: 10}}})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "ran out of time after 2") || strings.Contains(err.Error(), "cannot connect") ||
		!errors.Is(err, context.DeadlineExceeded) || !Retriable(err) {
		t.Fatalf("Commit past its deadline with the network cut: %v, want a retriable error saying it ran out of time after 2s", err)
	}
	proxy.Heal()
	if err := s.Commit(ctx, &sink.Batch{Rows: rows("in", 0, 5, 5), Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: 5, Next: 10}}}); err != nil {
		t.Fatalf("Commit after the network healed: %v", err)
	}
}

// The sink's sessions run with the bounds that end a frozen instance's
// transaction (idle_in_transaction_session_timeout, server keepalives)
// unless the URL sets them; libpq's client keepalive parameters are taken
// by the client, not sent to the server (which would refuse them), and a
// bad one is a configuration error.
func TestSessionBounds(t *testing.T) {
	d := newTestDB(t)
	show := func(s *Sink, name string) string {
		t.Helper()
		var v string
		if err := s.pool.QueryRow(testCtx(t), "SELECT current_setting('"+name+"')").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	s := d.open(t, Options{})
	for name, want := range map[string]string{"idle_in_transaction_session_timeout": "10s", "tcp_keepalives_idle": "5", "tcp_keepalives_count": "3"} {
		if got := show(s, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	u := pgtest.WithParam(t, pgtest.WithParam(t, d.URL, "idle_in_transaction_session_timeout", "30s"), "keepalives_idle", "7")
	s = d.open(t, Options{URL: u})
	if got := show(s, "idle_in_transaction_session_timeout"); got != "30s" {
		t.Errorf("with the URL's idle_in_transaction_session_timeout=30s: %q", got)
	}
	_, err := Open(testCtx(t), Options{URL: pgtest.WithParam(t, d.URL, "keepalives_idle", "soon"), Group: "g"})
	var ce *settings.Error
	if !errors.As(err, &ce) || ce.Field != SettingURL || !strings.Contains(err.Error(), "keepalives_idle") {
		t.Errorf("keepalives_idle=soon: %v, want a *settings.Error of the URL naming keepalives_idle", err)
	}
}

// The server's disk fills up under the sink's tables (a tablespace on a
// 2 MiB tmpfs of the test's own): a commit fails, retriable, and writes
// nothing; once space is freed, the same batch commits whole.
func TestDiskFull(t *testing.T) {
	srv := pgtest.StartServer(t)
	dir := filepath.Join(srv.Dir(t), "small") // where the server's user may enter
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(srv.Dir(t), "data")
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	opts := "size=2m,mode=0700,uid=" + strconv.Itoa(int(st.Uid)) + ",gid=" + strconv.Itoa(int(st.Gid))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("cannot mount a small filesystem for the full disk (needs root): %v: %s", err, out)
		}
		t.Fatalf("mounting a small filesystem for the full disk: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	ctx := testCtx(t)
	admin, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, q := range []string{"CREATE TABLESPACE small LOCATION '" + dir + "'",
		"CREATE TABLE full_rows (n int, v text) TABLESPACE small", "CREATE TABLE filler (v bytea) TABLESPACE small"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS full_rows, filler; DROP TABLESPACE small")
	})
	s, err := Open(ctx, Options{URL: srv.URL, Group: "full", Statement: "INSERT INTO full_rows (n, v) VALUES (@offset, @value_text)"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Fill the disk with what does not compress.
	for {
		if _, err := admin.Exec(ctx, "INSERT INTO filler SELECT decode(md5(random()::text) || md5(random()::text), 'hex') FROM generate_series(1, 2000)"); err != nil {
			if !strings.Contains(err.Error(), "53100") && !strings.Contains(err.Error(), "No space left") {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	p := record.TopicPartition{Topic: "in", Partition: 0}
	batch := &sink.Batch{Rows: rows("in", 0, 0, 200), Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: -1, Next: 200}}}
	for i := range batch.Rows {
		batch.Rows[i].Value = []byte(strings.Repeat(strconv.Itoa(i), 2000))
	}
	err = s.Commit(ctx, batch)
	if err == nil || !Retriable(err) || !strings.Contains(err.Error(), "53100") {
		t.Fatalf("Commit with the disk full: %v (retriable %v), want a retriable disk_full (53100)", err, Retriable(err))
	}
	if n := count(t, admin, "SELECT count(*) FROM full_rows"); n != 0 {
		t.Fatalf("%d rows written by the commit that failed", n)
	}
	if _, err := admin.Exec(ctx, "DROP TABLE filler"); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, batch); err != nil {
		t.Fatalf("Commit once space was freed: %v", err)
	}
	if n := count(t, admin, "SELECT count(DISTINCT n) FROM full_rows"); n != 200 {
		t.Fatalf("%d rows after the second commit, want 200", n)
	}
}

func count(t *testing.T, c *pgx.Conn, q string) int {
	t.Helper()
	var n int
	if err := c.QueryRow(testCtx(t), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
