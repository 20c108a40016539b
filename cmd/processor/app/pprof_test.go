package app

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// PROCESSOR_PPROF: off, /debug/pprof/ is not served (the status page's
// catch-all answers, without a profile); on, the index, the named
// profiles and a CPU profile are, and with PROCESSOR_HTTP_TOKEN_FILE only
// to a request with the token.
func TestPprofEndpointOptIn(t *testing.T) {
	file := filepath.Join(t.TempDir(), "http-token")
	writeToken(t, file, "pprof-token\n")
	tok, err := loadHTTPToken(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		ep    *endpoints
		auth  string
		codes map[string]int
	}{
		{"off", &endpoints{}, "", map[string]int{"/debug/pprof/heap": -http.StatusOK, "/debug/pprof/profile?seconds=1": -http.StatusOK}},
		{"on", &endpoints{pprof: true}, "", map[string]int{"/debug/pprof/": http.StatusOK, "/debug/pprof/heap?debug=1": http.StatusOK,
			"/debug/pprof/goroutine?debug=1": http.StatusOK, "/debug/pprof/profile?seconds=1": http.StatusOK}},
		{"on, no token", &endpoints{pprof: true, token: tok}, "", map[string]int{"/debug/pprof/": http.StatusUnauthorized,
			"/debug/pprof/heap": http.StatusUnauthorized, "/debug/pprof/profile?seconds=1": http.StatusUnauthorized}},
		{"on, token", &endpoints{pprof: true, token: tok}, "Bearer pprof-token", map[string]int{"/debug/pprof/heap?debug=1": http.StatusOK}},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := serveHTTP(ln, prometheus.NewRegistry(), c.ep)
		for path, want := range c.codes {
			req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+path, nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			profile := resp.StatusCode == http.StatusOK && (strings.Contains(string(b), "heap profile") || strings.Contains(string(b), "goroutine profile") ||
				strings.Contains(string(b), "Types of profiles available") || resp.Header.Get("Content-Type") == "application/octet-stream")
			switch {
			case want < 0 && profile:
				t.Errorf("%s: GET %s served a profile (%d), want none", c.name, path, resp.StatusCode)
			case want > 0 && resp.StatusCode != want:
				t.Errorf("%s: GET %s: %d, want %d", c.name, path, resp.StatusCode, want)
			case want == http.StatusOK && !profile:
				t.Errorf("%s: GET %s: no profile in %.80q", c.name, path, b)
			}
		}
		srv.Close()
	}
}
