package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/schema"
)

const (
	testUser     = "svc"
	testPassword = "s3cret-Pa55word"
	basePath     = "/apis/ccompat/v7"
)

// fakeRegistry speaks the few Confluent endpoints NewClient calls. A
// status set in fail is answered to every request instead.
type fakeRegistry struct {
	mu       sync.Mutex
	fail     int
	failBody string
	paths    []string
}

// ServeHTTP answers one request.
func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	fail, failBody := f.fail, f.failBody
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	if u, p, ok := r.BasicAuth(); !ok || u != testUser || p != testPassword {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error_code":401,"message":"Unauthorized"}`)
		return
	}
	if fail != 0 {
		w.WriteHeader(fail)
		fmt.Fprint(w, failBody)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, basePath)
	avroText := `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`
	switch {
	case r.Method == http.MethodGet && path == "/schemas/ids/7":
		json.NewEncoder(w).Encode(map[string]any{"schema": avroText})
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/schemas/ids/"):
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error_code":40403,"message":"Schema not found"}`)
	case r.Method == http.MethodGet && (path == "/subjects/orders-value/versions/latest" || path == "/subjects/orders-value/versions/2"):
		json.NewEncoder(w).Encode(map[string]any{"subject": "orders-value", "version": 2, "id": 7, "schema": avroText,
			"references": []map[string]any{{"name": "x", "subject": "y", "version": 1}}})
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/subjects/"):
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error_code":40401,"message":"Subject not found"}`)
	case r.Method == http.MethodPost && path == "/subjects/orders-value/versions":
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		if body["schemaType"] != "PROTOBUF" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"error_code":42201,"message":"wrong type"}`)
			return
		}
		fmt.Fprint(w, `{"id":9}`)
	case r.Method == http.MethodPost && path == "/subjects/orders-value":
		fmt.Fprint(w, `{"subject":"orders-value","id":9,"version":3,"schema":"x"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error_code":404,"message":"HTTP 404 Not Found"}`)
	}
}

// newFake starts a fakeRegistry and a client of it.
func newFake(t *testing.T, password string) (*fakeRegistry, schema.Registry) {
	t.Helper()
	f := &fakeRegistry{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{srv.URL + basePath}, Username: testUser, Password: password, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return f, reg
}

// noPassword fails if err's message holds the password.
func noPassword(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), testPassword) {
		t.Errorf("the error message holds the password: %v", err)
	}
}

// TestClientOK checks the happy paths of every call.
func TestClientOK(t *testing.T) {
	f, reg := newFake(t, testPassword)
	ctx := context.Background()
	s, err := reg.SchemaByID(ctx, 7)
	if err != nil || s.Type != schema.Avro || !strings.Contains(s.Text, `"name":"R"`) {
		t.Fatalf("SchemaByID: %+v, %v", s, err)
	}
	sub, err := reg.Latest(ctx, "orders-value")
	if err != nil || sub.ID != 7 || sub.Version != 2 || len(sub.Schema.References) != 1 || sub.Schema.References[0].Subject != "y" {
		t.Fatalf("Latest: %+v, %v", sub, err)
	}
	if sub, err = reg.SubjectVersion(ctx, "orders-value", 2); err != nil || sub.Version != 2 {
		t.Fatalf("SubjectVersion: %+v, %v", sub, err)
	}
	sub, err = reg.Register(ctx, "orders-value", schema.Schema{Type: schema.Protobuf, Text: `syntax = "proto3"; message M {}`})
	if err != nil || sub.ID != 9 || sub.Version != 3 {
		t.Fatalf("Register: %+v, %v", sub, err)
	}
	f.mu.Lock()
	first := f.paths[0]
	f.mu.Unlock()
	if want := "GET " + basePath + "/schemas/ids/7"; first != want {
		t.Errorf("first request %q, want %q", first, want)
	}

	// The decoder works over the client.
	dec := schema.NewDecoder(reg, schema.Avro, schema.DecoderOptions{})
	out, err := dec.Decode(ctx, []byte{0, 0, 0, 0, 7, 0x54}, nil) // 42 zigzag
	if err != nil || string(out) != `{"a":42}` {
		t.Errorf("Decode over HTTP: %s, %v", out, err)
	}
	_, err = dec.Decode(ctx, []byte{0, 0, 0, 0, 42, 0}, nil)
	wantFault(t, err, schema.FaultRecord, "the registry does not have the schema id the record names: schema registry: schema id 42: HTTP 404", "40403")
}

// TestClientFaults checks the fault of each status and transport error,
// and that no message holds the password.
func TestClientFaults(t *testing.T) {
	ctx := context.Background()
	f, reg := newFake(t, testPassword)
	call := map[string]func() error{
		"SchemaByID": func() error { _, err := reg.SchemaByID(ctx, 42); return err },
		"Latest":     func() error { _, err := reg.Latest(ctx, "nobody"); return err },
		"Version":    func() error { _, err := reg.SubjectVersion(ctx, "orders-value", 5); return err },
		"Register": func() error {
			_, err := reg.Register(ctx, "orders-value", schema.Schema{Type: schema.Avro, Text: `"int"`})
			return err
		},
	}
	for name, want := range map[string]schema.Fault{"SchemaByID": schema.FaultRecord, "Latest": schema.FaultSchema, "Version": schema.FaultSchema, "Register": schema.FaultSchema} {
		err := call[name]()
		wantFault(t, err, want)
		noPassword(t, err)
	}
	wantFault(t, call["SchemaByID"](), schema.FaultRecord, "40403")
	wantFault(t, call["Latest"](), schema.FaultSchema, "40401")

	for status, want := range map[int]schema.Fault{401: schema.FaultCredentials, 403: schema.FaultCredentials, 409: schema.FaultSchema,
		500: schema.FaultRegistry, 503: schema.FaultRegistry, 429: schema.FaultRegistry} {
		f.mu.Lock()
		f.fail, f.failBody = status, `{"error_code":`+fmt.Sprint(status)+`,"message":"no: `+testPassword+`"}`
		f.mu.Unlock()
		for name, c := range call {
			err := c()
			if status == 409 && name != "Register" {
				continue
			}
			if got := schema.FaultOf(err); got != want {
				t.Errorf("%s with HTTP %d: fault %q, want %q: %v", name, status, got, want, err)
			}
			noPassword(t, err)
		}
	}
}

// TestClientWrongURL checks that a 404 that is not the registry's (no
// registry error code) is a schema fault, not every record's.
func TestClientWrongURL(t *testing.T) {
	srv := httptest.NewServer(&fakeRegistry{})
	defer srv.Close()
	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{srv.URL + "/wrong"}, Username: testUser, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.SchemaByID(context.Background(), 7)
	wantFault(t, err, schema.FaultSchema, "check the registry URL")
}

// TestClientWrongPassword checks that the server's 401 is a credentials
// fault that does not echo the password.
func TestClientWrongPassword(t *testing.T) {
	_, reg := newFake(t, "wrong-"+testPassword)
	_, err := reg.SchemaByID(context.Background(), 7)
	wantFault(t, err, schema.FaultCredentials, "401", "username and password")
	noPassword(t, err)
}

// TestClientUnreachable checks a closed port, a timeout, and that a
// second URL is tried when the first cannot be reached.
func TestClientUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{closed}, Username: testUser, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.SchemaByID(context.Background(), 7)
	wantFault(t, err, schema.FaultRegistry, "could not be reached")
	noPassword(t, err)

	// A password in the URL is kept out of messages too.
	reg, err = schema.NewClient(schema.ClientOptions{URLs: []string{strings.Replace(closed, "//", "//svc:"+testPassword+"@", 1)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.SchemaByID(context.Background(), 7)
	wantFault(t, err, schema.FaultRegistry)
	noPassword(t, err)

	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(time.Second) }))
	defer hang.Close()
	reg, _ = schema.NewClient(schema.ClientOptions{URLs: []string{hang.URL}, Timeout: 50 * time.Millisecond})
	_, err = reg.Latest(context.Background(), "orders-value")
	wantFault(t, err, schema.FaultRegistry)

	f := &fakeRegistry{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	reg, _ = schema.NewClient(schema.ClientOptions{URLs: []string{closed, srv.URL + basePath}, Username: testUser, Password: testPassword})
	if _, err := reg.SchemaByID(context.Background(), 7); err != nil {
		t.Errorf("the second URL was not tried: %v", err)
	}
}

// TestNewClientOptions checks the options NewClient refuses.
func TestNewClientOptions(t *testing.T) {
	for _, urls := range [][]string{nil, {"127.0.0.1:8081"}, {"ftp://x"}} {
		_, err := schema.NewClient(schema.ClientOptions{URLs: urls, Password: testPassword})
		wantFault(t, err, schema.FaultSchema)
	}
	_, err := schema.NewClient(schema.ClientOptions{URLs: []string{"ftp://u:" + testPassword + "@h/"}})
	noPassword(t, err)
}
