package schema_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/srserver"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/schema"
)

// IDError is what the pipeline looks for to write processor.error.schema.id.
var _ record.SchemaIDError = (*schema.IDError)(nil)

// schemaIDOf returns the id an error names (record.SchemaIDError), -1
// for none.
func schemaIDOf(err error) int {
	var e record.SchemaIDError
	if errors.As(err, &e) {
		return e.SchemaID()
	}
	return -1
}

// refRegistry answers schema id 5, a Protobuf schema importing the
// reference "gone.proto" of subject "gone", and answers that subject's
// version with status 404 and body gone.
func refRegistry(t *testing.T, gone string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		switch r.URL.Path {
		case "/schemas/ids/5":
			fmt.Fprint(w, `{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\"; import \"gone.proto\"; message M { G g = 1; }",`+
				`"references":[{"name":"gone.proto","subject":"gone","version":1}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, gone)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// decodeVia decodes b (Protobuf) with a Decoder over a client of url.
func decodeVia(t *testing.T, url string, b []byte) error {
	t.Helper()
	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{url}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = schema.NewDecoder(reg, schema.Protobuf, schema.DecoderOptions{}).Decode(context.Background(), b, nil)
	return err
}

// TestUnknownSchemaID tells "the registry answered: no such schema" from
// "the registry did not answer", over HTTP: an id the registry answers
// 404 (40403) for, and a schema whose reference it answers 404 (40401)
// for, are the record's fault and name the id (IDError, which the dead
// letter carries in processor.error.schema.id); a payload that does not
// decode names it too. A closed port, and a 404 without a registry error
// code (a URL that is not the registry's API) even for a reference, are
// not the record's fault, name no id, and are asked again next time.
// A record without the magic byte names none.
func TestUnknownSchemaID(t *testing.T) {
	srv, err := srserver.New(srserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	url, err := srv.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	unknown := []byte{0, 0x7f, 0xff, 0xff, 0xf0, 0, 0x0a, 0}
	for _, tc := range []struct {
		name, url string
		b         []byte
		fault     schema.Fault
		id        int
		says      string
	}{
		{"never registered", url, unknown, schema.FaultRecord, 0x7ffffff0, "40403"},
		{"reference gone", refRegistry(t, `{"error_code":40401,"message":"Subject 'gone' not found."}`), []byte{0, 0, 0, 0, 5, 0},
			schema.FaultRecord, 5, `reference "gone.proto"`},
		{"reference behind a proxy's 404", refRegistry(t, `<html>Not Found</html>`), []byte{0, 0, 0, 0, 5, 0},
			schema.FaultSchema, -1, "check the registry URL"},
		{"registry down", closed, unknown, schema.FaultRegistry, -1, "could not be reached"},
		{"no magic byte", url, []byte(`{}`), schema.FaultRecord, -1, "no magic byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeVia(t, tc.url, tc.b)
			wantFault(t, err, tc.fault, tc.says)
			if id := schemaIDOf(err); id != tc.id {
				t.Errorf("the error names schema id %d, want %d: %v", id, tc.id, err)
			}
		})
	}

	reg := newSRClient(t, url)
	sub, err := reg.Register(context.Background(), "s-value", schema.Schema{Type: schema.Protobuf, Text: `syntax = "proto3"; message M { string a = 1; }`})
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte{0, 0, 0, 0, byte(sub.ID), 0, 0x0a, 0x10, 'x'} // field 1 claims 16 bytes
	err = decodeVia(t, url, bad)
	wantFault(t, err, schema.FaultRecord, "does not decode")
	if id := schemaIDOf(err); id != sub.ID || !strings.Contains(err.Error(), fmt.Sprint(sub.ID)) {
		t.Errorf("a payload that does not decode names schema id %d, want %d: %v", id, sub.ID, err)
	}
}

// newSRClient is a client of the registry at url.
func newSRClient(t *testing.T, url string) schema.Registry {
	t.Helper()
	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
