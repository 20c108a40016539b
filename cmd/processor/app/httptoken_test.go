package app

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
)

// writeToken writes tok to path as a Kubernetes Secret volume updates a
// file: a new file renamed over the old one.
func writeToken(t *testing.T, path, tok string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// With PROCESSOR_HTTP_TOKEN_FILE, / and /status answer 401 with a Bearer
// challenge unless the request carries the token, /metrics, /healthz and
// /readyz (what `processor probe` reads) stay open, and a token rotated in
// the file replaces the old one without a restart.
func TestHTTPTokenGuardsStatus(t *testing.T) {
	file := filepath.Join(t.TempDir(), "http-token")
	writeToken(t, file, "first-token\n")
	tok, err := loadHTTPToken(file)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ep := &endpoints{token: tok}
	registerReady(reg, ep.ready)
	srv := serveHTTP(ln, reg, ep)
	defer srv.Close()

	get := func(path, auth string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+ln.Addr().String()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	check := func(good string, bad ...string) {
		t.Helper()
		for _, path := range []string{"/", "/status"} {
			for _, auth := range append([]string{""}, bad...) {
				code, h, body := get(path, auth)
				if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("GET %s with %q: %d, WWW-Authenticate %q; want 401 with a Bearer challenge", path, auth, code, h.Get("WWW-Authenticate"))
				}
				if strings.Contains(body, "token\"") || strings.Contains(body, "first-token") || strings.Contains(body, "second") {
					t.Errorf("GET %s with %q: the answer shows a token: %s", path, auth, body)
				}
			}
			if code, _, body := get(path, good); code != http.StatusOK {
				t.Errorf("GET %s with %q: %d %s, want 200", path, good, code, body)
			}
		}
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			if code, _, _ := get(path, ""); code == http.StatusUnauthorized {
				t.Errorf("GET %s without a token: 401; scrapers and probes must get through", path)
			}
		}
	}
	check("Bearer first-token", "Bearer first-toke", "Bearer first-token2", "Basic Zmlyc3QtdG9rZW4=", "first-token")
	if code, _, _ := get("/", "bearer first-token"); code != http.StatusOK {
		t.Errorf("the scheme is case-insensitive (RFC 9110): bearer got %d", code)
	}

	// Rotation: the new token takes over once the file has changed.
	writeToken(t, file, "second-token-longer\n")
	time.Sleep(tokenRecheck + 100*time.Millisecond)
	check("Bearer second-token-longer", "Bearer first-token")

	// A file that is gone for a moment keeps the token as it was.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	time.Sleep(tokenRecheck + 100*time.Millisecond)
	check("Bearer second-token-longer", "Bearer first-token")
}

// An unreadable or empty token file is a configuration error naming
// PROCESSOR_HTTP_TOKEN_FILE, and no message shows the token; without the
// setting nothing is guarded.
func TestHTTPTokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing"), empty, dir} {
		_, err := loadHTTPToken(path)
		var ce *settings.Error
		if !errors.As(err, &ce) || ce.Var != config.EnvName("HTTP_TOKEN_FILE") || !strings.Contains(err.Error(), path) {
			t.Errorf("loadHTTPToken(%s): %v, want a *settings.Error naming PROCESSOR_HTTP_TOKEN_FILE and the path", path, err)
		}
		if code := configError(err); code != exitConfig {
			t.Errorf("loadHTTPToken(%s): exit %d, want %d", path, code, exitConfig)
		}
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := loadHTTPToken(secret)
	if err != nil {
		t.Fatal(err)
	}
	if shown := fmt.Sprintf("%v %+v %#v", tok, tok, tok); strings.Contains(shown, "s3cr3t-value") {
		t.Errorf("printing the token shows it: %s", shown)
	}
	if tok, err := loadHTTPToken(""); tok != nil || err != nil {
		t.Errorf("loadHTTPToken(\"\") = %v, %v; want nothing guarded", tok, err)
	}
	h := (*httpToken)(nil).guard(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/status", nil))
	if rec.Code != http.StatusTeapot {
		t.Errorf("without a token file the handler answered %d, want it unguarded", rec.Code)
	}
}
