package app

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/sink"
)

// The configuration error line of a bad PROCESSOR_POSTGRES_URL never shows
// its password, whatever RFC 3986 reserved character the password holds,
// as written or %-escaped, in the userinfo or as a password parameter.
func TestPostgresURLErrorLineHidesThePassword(t *testing.T) {
	const reserved = ":/?#[]@!$&'()*+,;="
	for _, c := range reserved {
		for _, pw := range []string{"s3cretA" + string(c) + "s3cretB", "s3cretA" + url.QueryEscape(string(c)) + "s3cretB"} {
			for _, u := range []string{
				"postgres://u:" + pw + "@127.0.0.1:notaport/db",
				"postgres://u@127.0.0.1:1/db?password=" + pw + "&connect_timeout=soon",
			} {
				line, code := postgresConfigLine(t, u)
				if code != exitConfig || !strings.HasPrefix(line, "processor: configuration error: PROCESSOR_POSTGRES_URL=") || strings.Contains(line, "\n") {
					t.Errorf("%s: exit %d, line %q; want 2 and one line about PROCESSOR_POSTGRES_URL", u, code, line)
				}
				if strings.Contains(line, "s3cret") || strings.Contains(line, "3cretB") {
					t.Errorf("%s: the line shows the password: %s", u, line)
				}
			}
		}
	}
}

// postgresConfigLine opens the database of PROCESSOR_POSTGRES_URL=u as
// Main does (chooseSink, then open), and returns the line configError prints for its error, and
// the exit code.
func postgresConfigLine(t *testing.T, u string) (string, int) {
	t.Helper()
	t.Setenv("PROCESSOR_POSTGRES_URL", u)
	dest, err := chooseSink(sink.Default, &config.Config{Sink: "postgres", Group: "g"})
	if err != nil {
		t.Fatalf("%s: chooseSink = %v", u, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = dest.open(ctx, "g", prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err == nil || ctx.Err() != nil {
		t.Fatalf("%s: openDatabase = %v, want a configuration error at once", u, err)
	}
	r, w, perr := os.Pipe()
	if perr != nil {
		t.Fatal(perr)
	}
	stderr := os.Stderr
	os.Stderr = w
	code := configError(err)
	os.Stderr = stderr
	w.Close()
	out, _ := io.ReadAll(r)
	r.Close()
	return strings.TrimSpace(string(out)), code
}
