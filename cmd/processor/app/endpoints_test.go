package app

import (
	"io"
	"net"
	"net/http"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// processor_ready is 1 exactly when /readyz answers 200: both read
// endpoints.ready, at the moment of the request.
func TestReadyGaugeFollowsReadyz(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ep := &endpoints{}
	registerReady(reg, ep.ready)
	srv := serveHTTP(ln, reg, ep)
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	gauge := regexp.MustCompile(`(?m)^processor_ready (\S+)$`)
	for _, tc := range []struct {
		phase string // what the start waits for; "" for none
		code  int
		value string
	}{
		{"waiting for PostgreSQL", http.StatusServiceUnavailable, "0"},
		{"", http.StatusOK, "1"},
		{"starting the embedded broker", http.StatusServiceUnavailable, "0"},
	} {
		if tc.phase != "" {
			ep.starting(tc.phase)
		} else {
			ep.phase.Store(nil)
		}
		code, body := get("/readyz")
		_, metrics := get("/metrics")
		m := gauge.FindStringSubmatch(metrics)
		if code != tc.code || m == nil || m[1] != tc.value {
			t.Errorf("waiting for %q: /readyz %d %q, processor_ready %v; want %d and %s", tc.phase, code, body, m, tc.code, tc.value)
		}
	}
}
