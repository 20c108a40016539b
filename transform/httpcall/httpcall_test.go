package httpcall

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/transformtest"
)

// secretValue is what the header file of the tests holds: no error
// message and no log line may show it.
const secretValue = "Bearer s3cr3t-never-shown"

// secretFile writes secretValue to a file and returns its path.
func secretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "authorization")
	if err := os.WriteFile(p, []byte(secretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// build builds a chain of the http transform with the given settings.
func build(t *testing.T, s map[string]string) *transform.Chain {
	t.Helper()
	c, err := transformtest.Build("http", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// run runs value through c.
func run(c *transform.Chain, value string) ([]*kgo.Record, error) {
	return c.Process(context.Background(), record.Source{Topic: "in"}, &kgo.Record{Key: []byte("k"), Value: []byte(value)}, nil)
}

// values are the outputs' values.
func values(out []*kgo.Record) []string {
	var vs []string
	for _, r := range out {
		vs = append(vs, string(r.Value))
	}
	return vs
}

// A GET with the URL from the record, a header from HEADERS and one from a
// file, answered 200 with JSON merged into the record by the default
// RESPONSE; a POST with a JSON body; RESPONSE with several results and
// none.
func TestCallAndMerge(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(r.Method + " " + r.URL.Path + " auth=" + r.Header.Get("Authorization") + " accept=" + r.Header.Get("Accept") +
			" ct=" + r.Header.Get("Content-Type") + " body=" + string(b))
		w.Header().Set("X-Served-By", "users-1")
		if strings.HasPrefix(r.URL.Path, "/text") {
			io.WriteString(w, "plain words")
			return
		}
		io.WriteString(w, `{"name":"Ada","id":12345678901234567890}`)
	}))
	defer srv.Close()
	c := build(t, map[string]string{"URL": `"` + srv.URL + `/users/\(.user)"`, "HEADERS": "Accept=application/json",
		"HEADER_FILES": "Authorization=" + secretFile(t)})
	out, err := run(c, `{"user":"u1","n":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`{"n":1,"response":{"id":12345678901234567890,"name":"Ada"},"user":"u1"}`}; strings.Join(values(out), "|") != want[0] {
		t.Errorf("outputs %q, want %q", values(out), want)
	}
	if want := "GET /users/u1 auth=" + secretValue + " accept=application/json ct= body="; got.Load() != want {
		t.Errorf("the server saw %q, want %q", got.Load(), want)
	}

	c = build(t, map[string]string{"URL": `"` + srv.URL + `/text"`, "METHOD": "POST", "BODY": "{id: .user}",
		"RESPONSE": `.response.body, .response.headers["x-served-by"], (.response.status | tostring)`})
	out, err = run(c, `{"user":"u2"}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"plain words"|"users-1"|"200"`; strings.Join(values(out), "|") != want {
		t.Errorf("outputs %q, want %s", values(out), want)
	}
	if len(out) == 3 && (string(out[1].Key) != "k" || out[1] == out[0]) {
		t.Errorf("a second output is %+v, want a new record with the input's key", out[1])
	}
	if want := `POST /text auth= accept= ct=application/json body={"id":"u2"}`; got.Load() != want {
		t.Errorf("the server saw %q, want %q", got.Load(), want)
	}

	c = build(t, map[string]string{"URL": `"` + srv.URL + `/x"`, "METHOD": `if .put then "PUT" else "DELETE" end`,
		"BODY": ".text", "RESPONSE": "empty"})
	if out, err = run(c, `{"put":true,"text":"raw"}`); err != nil || len(out) != 0 {
		t.Errorf("RESPONSE empty: %q, %v; want no output", values(out), err)
	}
	if want := "PUT /x auth= accept= ct= body=raw"; got.Load() != want {
		t.Errorf("the server saw %q, want %q", got.Load(), want)
	}
}

// statusServer answers every request with the status in its path
// (/404), and the body "why <status>".
func statusServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var code int
		if err := json.Unmarshal([]byte(strings.TrimPrefix(r.URL.Path, "/")), &code); err != nil {
			code = 200
		}
		w.WriteHeader(code)
		io.WriteString(w, "why\n  "+r.URL.Path+"\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A 4xx (and a redirect left unfollowed) fails the record: neither
// retriable nor unavailable; a 5xx, 408 and 429 make the service
// unavailable. No message shows the secret header.
func TestStatusClasses(t *testing.T) {
	srv := statusServer(t)
	c := build(t, map[string]string{"URL": `"` + srv.URL + `/\(.status)"`, "HEADER_FILES": "Authorization=" + secretFile(t)})
	for _, tc := range []struct {
		status      string
		unavailable bool
	}{{"400", false}, {"404", false}, {"422", false}, {"304", false}, {"500", true}, {"502", true}, {"503", true}, {"408", true}, {"429", true}} {
		_, err := run(c, `{"status":`+tc.status+`}`)
		if err == nil {
			t.Errorf("status %s: no error", tc.status)
			continue
		}
		if transform.IsUnavailable(err) != tc.unavailable || transform.IsRetriable(err) || transform.IsFatal(err) {
			t.Errorf("status %s: %v: unavailable %v, want %v, and not retriable nor fatal", tc.status, err, transform.IsUnavailable(err), tc.unavailable)
		}
		if !strings.Contains(err.Error(), tc.status) || tc.status != "304" && !strings.Contains(err.Error(), "why /"+tc.status) || strings.Contains(err.Error(), "\n") {
			t.Errorf("status %s: %q does not say the status and the body on one line", tc.status, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("status %s: %q shows the secret header", tc.status, err)
		}
	}
	// 204 has no body on the wire: the response body is null.
	if out, err := run(c, `{"status":204}`); err != nil || len(out) != 1 || string(out[0].Value) != `{"response":null,"status":204}` {
		t.Errorf("status 204: %q, %v", values(out), err)
	}
}

// A request past TIMEOUT and a refused connection make the service
// unavailable, with messages that name the setting (by the variable the
// host gives it) and not the secret; a context that ends first is its own
// error, not the service's.
func TestTimeoutRefusedAndCancel(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	names := transform.WithNames(transform.Names{Setting: func(p settings.Plugin, s string) string { return "PROCESSOR_HTTP_" + s }})
	c, err := transformtest.Build("http", map[string]string{"URL": `"` + slow.URL + `"`, "TIMEOUT": "50ms", "HEADER_FILES": "Authorization=" + secretFile(t)}, names)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = run(c, `{}`)
	if !transform.IsUnavailable(err) || !strings.Contains(err.Error(), "PROCESSOR_HTTP_TIMEOUT=50ms") || !strings.Contains(err.Error(), "PROCESSOR_HTTP_URL") {
		t.Errorf("a slow service: %v; want unavailable, naming PROCESSOR_HTTP_TIMEOUT=50ms and PROCESSOR_HTTP_URL", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c = build(t, map[string]string{"URL": `"http://` + addr + `/x"`, "HEADER_FILES": "Authorization=" + secretFile(t)})
	_, err = run(c, `{}`)
	if !transform.IsUnavailable(err) || !strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("a refused connection: %v; want unavailable, saying refused, without the secret", err)
	}

	c = build(t, map[string]string{"URL": `"` + slow.URL + `"`, "TIMEOUT": "10s"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Process(ctx, record.Source{}, &kgo.Record{Value: []byte(`{}`)}, nil)
	if err == nil || transform.IsUnavailable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the caller's deadline: %v; want its own error, not the service's", err)
	}
}

// Records whose expressions yield what cannot be a request fail as
// records; so does a value that is not JSON.
func TestRecordFaults(t *testing.T) {
	srv := statusServer(t)
	c := build(t, map[string]string{"URL": `.url`, "METHOD": ".m"})
	for in, want := range map[string]string{
		`not json`:                               "not JSON",
		`{"m":"GET"}`:                            "URL yielded null",
		`{"url":"ftp://x/y","m":"GET"}`:          "want an http or https URL",
		`{"url":"` + srv.URL + `","m":"get it"}`: "METHOD yielded",
		`{"url":"` + srv.URL + `","m":7}`:        "METHOD yielded 7",
	} {
		_, err := run(c, in)
		if err == nil || transform.IsUnavailable(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a record error saying %q", in, err, want)
		}
	}
	c = build(t, map[string]string{"URL": `.urls[]`})
	if _, err := run(c, `{"urls":["`+srv.URL+`","`+srv.URL+`"]}`); err == nil || !strings.Contains(err.Error(), "more than one") {
		t.Errorf("two URLs: %v", err)
	}
}

// Settings that cannot work are one-line setting errors naming the
// setting; none shows a header file's content.
func TestSettingErrors(t *testing.T) {
	secret := secretFile(t)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, tc := range []struct {
		s     map[string]string
		field string
	}{
		{map[string]string{}, "URL"},
		{map[string]string{"URL": `"http://x`}, "URL"},
		{map[string]string{"URL": `"http://x"`, "METHOD": "get("}, "METHOD"},
		{map[string]string{"URL": `"http://x"`, "BODY": "{"}, "BODY"},
		{map[string]string{"URL": `"http://x"`, "RESPONSE": ".["}, "RESPONSE"},
		{map[string]string{"URL": `"http://x"`, "TIMEOUT": "0s"}, "TIMEOUT"},
		{map[string]string{"URL": `"http://x"`, "TIMEOUT": "2m"}, "TIMEOUT"},
		{map[string]string{"URL": `"http://x"`, "MAX_IN_FLIGHT": "0"}, "MAX_IN_FLIGHT"},
		{map[string]string{"URL": `"http://x"`, "MAX_IN_FLIGHT": "257"}, "MAX_IN_FLIGHT"},
		{map[string]string{"URL": `"http://x"`, "HEADERS": "Authorization=Bearer s3cr3t"}, "HEADERS"},
		{map[string]string{"URL": `"http://x"`, "HEADERS": "X-Api-Key=x"}, "HEADERS"},
		{map[string]string{"URL": `"http://x"`, "HEADERS": "noequals"}, "HEADERS"},
		{map[string]string{"URL": `"http://x"`, "HEADERS": "Bad Name=x"}, "HEADERS"},
		{map[string]string{"URL": `"http://x"`, "HEADER_FILES": "Authorization=/nonexistent/file"}, "HEADER_FILES"},
		{map[string]string{"URL": `"http://x"`, "HEADER_FILES": "Authorization=" + empty}, "HEADER_FILES"},
		{map[string]string{"URL": `"http://x"`, "HEADERS": "X-Auth=a", "HEADER_FILES": "X-Auth=" + secret}, "HEADER_FILES"},
	} {
		_, err := transformtest.Build("http", tc.s)
		var se *settings.Error
		if !errors.As(err, &se) || se.Field != tc.field {
			t.Errorf("%v: %v, want a setting error of %s", tc.s, err, tc.field)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || strings.Contains(msg, "s3cr3t") {
			t.Errorf("%v: %q is not one line without the secret", tc.s, msg)
		}
	}
}

// The transform declares what the processor schedules by: ordered,
// MAX_IN_FLIGHT records at once, TIMEOUT per call, the value touched.
func TestDeclarations(t *testing.T) {
	c := build(t, map[string]string{"URL": `"http://x"`, "MAX_IN_FLIGHT": "8", "TIMEOUT": "300ms"})
	if n, e := c.InFlight(); n != 8 || e.Name != "http" {
		t.Errorf("InFlight %d (%v), want 8 (http)", n, e)
	}
	if d, _ := c.CallTimeout(); d != 300*time.Millisecond {
		t.Errorf("CallTimeout %v, want 300ms", d)
	}
	if !c.Ordered() || c.Touches() != transform.PartValue {
		t.Errorf("ordered %v, touches %v; want ordered, the value", c.Ordered(), c.Touches())
	}
	if n, _ := build(t, map[string]string{"URL": `"http://x"`}).InFlight(); n != 1 {
		t.Errorf("MAX_IN_FLIGHT=1: chain InFlight %d, want 1", n)
	}
}
