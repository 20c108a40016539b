package main

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// The drill's service answers GET /seq/<n> with {"seq": n}, 503 while
// down and 400 to a path without a seq, counting each; the instances get
// its URL, the answer merged as svc, a timeout within the drill's
// transaction budget, and 8 requests in flight only under key ordering.
func TestHTTPService(t *testing.T) {
	s, err := startHTTPService()
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/seq/1007"); code != 200 || body != `{"seq":1007}` {
		t.Errorf("GET /seq/1007: %d %q", code, body)
	}
	s.down.Store(true)
	if code, _ := get("/seq/1008"); code != http.StatusServiceUnavailable {
		t.Errorf("GET while down: %d, want 503", code)
	}
	s.down.Store(false)
	if code, _ := get("/seq/null"); code != http.StatusBadRequest {
		t.Errorf("GET /seq/null: %d, want 400", code)
	}
	if a, r, b := s.answered.Load(), s.refused.Load(), s.bad.Load(); a != 1 || r != 1 || b != 1 {
		t.Errorf("answered %d, refused %d, malformed %d; want 1 each", a, r, b)
	}

	d := &driver{
		o: options{sessionTimeout: 6 * time.Second, txnTimeout: 5 * time.Second, transforms: []string{"jq", "http"},
			jqExpr: ".seen = true", policies: []string{"dlq"}, guarantee: "exactly_once", sink: "kafka", ordering: "key"},
		brokers: []string{"127.0.0.1:1"}, group: "chaos-x", in: "chaos-in-x", out: "chaos-out-x", svc: s,
	}
	env := d.instance(1).Env()
	for _, kv := range []string{`PROCESSOR_HTTP_URL="http://` + s.addr + `/seq/\(.seq)"`,
		"PROCESSOR_HTTP_RESPONSE=.record + {svc: .response.body.seq}", "PROCESSOR_HTTP_TIMEOUT=500ms",
		"PROCESSOR_HTTP_MAX_IN_FLIGHT=8", "PROCESSOR_TRANSFORMS=jq,http"} {
		if !slices.Contains(env, kv) {
			t.Errorf("instance with -ordering key: no %s in %v", kv, env)
		}
	}
	d.o.ordering = ""
	if env := d.instance(1).Env(); !slices.Contains(env, "PROCESSOR_HTTP_MAX_IN_FLIGHT=1") {
		t.Errorf("instance without -ordering key: %v, want MAX_IN_FLIGHT 1", env)
	}
}
