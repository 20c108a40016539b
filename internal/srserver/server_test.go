package srserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/vnd.schemaregistry.v1+json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("POST %s: answer not JSON: %v", url, err)
	}
	return resp.StatusCode, m
}

// startServer starts a server with o on a free port of the loopback and
// returns it and its base URL; it closes when the test ends.
func startServer(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, base
}

// TestPersistence: with a folder, a new server on it keeps the ids,
// versions and levels, and goes on numbering after them.
func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	start := func() (*Server, string) {
		s, base := startServer(t, Options{Dir: dir})
		return s, base + CcompatPrefix
	}
	s, base := start()
	a := `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}"}`
	if code, m := post(t, base+"/subjects/a-value/versions", a); code != 200 || m["id"] != float64(1) {
		t.Fatalf("register: %d %v", code, m)
	}
	req, _ := http.NewRequest(http.MethodPut, base+"/config/a-value", bytes.NewBufferString(`{"compatibility":"NONE"}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT config: %v %v", resp, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); err != nil {
		t.Fatalf("no state file: %v", err)
	}
	_, base = start()
	if code, m := post(t, base+"/subjects/other-value/versions", a); code != 200 || m["id"] != float64(1) {
		t.Fatalf("after a restart, the same schema under another subject: %d %v, want id 1", code, m)
	}
	b := `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"y\",\"type\":\"long\"}]}"}`
	if code, m := post(t, base+"/subjects/a-value/versions", b); code != 200 || m["id"] != float64(2) {
		t.Fatalf("after a restart, a new schema (subject level NONE kept): %d %v, want id 2", code, m)
	}
	resp, err := http.Get(base + "/config/a-value")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c["compatibilityLevel"] != "NONE" {
		t.Fatalf("subject level after a restart: %v %v", c, err)
	}
	if _, err := New(Options{Compatibility: "SIDEWAYS"}); err == nil {
		t.Fatal("an unknown level was accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Dir: dir}); err == nil {
		t.Fatal("a corrupt state file was accepted")
	}
}

// TestForwardAndFull: FORWARD refuses what the old schema cannot read
// (a field removed that it needs), FULL both ways; a bad level is 42203.
func TestForwardAndFull(t *testing.T) {
	_, base := startServer(t, Options{Compatibility: "FORWARD"})
	two := `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"},{\"name\":\"y\",\"type\":\"int\"}]}"}`
	one := `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}"}`
	if code, m := post(t, base+"/subjects/f/versions", two); code != 200 {
		t.Fatalf("register: %d %v", code, m)
	}
	if code, m := post(t, base+"/subjects/f/versions", one); code != 409 || m["error_code"] != float64(409) {
		t.Fatalf("FORWARD, y dropped: %d %v, want 409", code, m)
	}
	if code, m := post(t, base+"/compatibility/subjects/f/versions/latest", one); code != 200 || m["is_compatible"] != false {
		t.Fatalf("check: %d %v", code, m)
	}
	req, _ := http.NewRequest(http.MethodPut, base+"/config", bytes.NewBufferString(`{"compatibility":"SIDEWAYS"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode != 422 || m["error_code"] != float64(42203) {
		t.Fatalf("bad level: %d %v", resp.StatusCode, m)
	}
}

// GET /schemas/ids/{id}/subjects and /versions name the subjects and
// versions that use a schema, in subject order; an id that is not a
// number, or names no schema, is 404 with error code 40403.
func TestSchemaUsages(t *testing.T) {
	_, base := startServer(t, Options{})
	base += CcompatPrefix
	a := `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}"}`
	b := `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"},{\"name\":\"y\",\"type\":\"int\",\"default\":0}]}"}`
	for _, reg := range []struct{ subject, body string }{{"z-value", a}, {"m-value", b}, {"m-value", a}, {"c-value", a}} {
		if code, m := post(t, base+"/subjects/"+reg.subject+"/versions", reg.body); code != 200 {
			t.Fatalf("register under %s: %d %v", reg.subject, code, m)
		}
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(bytes.TrimSpace(buf.Bytes()))
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/schemas/ids/1/subjects", 200, `["c-value","m-value","z-value"]`},
		{"/schemas/ids/1/versions", 200, `[{"subject":"c-value","version":1},{"subject":"m-value","version":2},{"subject":"z-value","version":1}]`},
		{"/schemas/ids/2/subjects", 200, `["m-value"]`},
		{"/schemas/ids/9/subjects", 404, `{"error_code":40403,"message":"Schema 9 not found."}`},
		{"/schemas/ids/9/versions", 404, `{"error_code":40403,"message":"Schema 9 not found."}`},
		{"/schemas/ids/x/subjects", 404, `{"error_code":40403,"message":"Schema x not found."}`},
		{"/schemas/ids/0/versions", 404, `{"error_code":40403,"message":"Schema 0 not found."}`},
	} {
		if code, body := get(tc.path); code != tc.code || body != tc.want {
			t.Errorf("GET %s: %d %s, want %d %s", tc.path, code, body, tc.code, tc.want)
		}
	}
}
