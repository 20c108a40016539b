package srserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/interop"
)

// record is an Avro record R with the given fields.
func record(fields ...string) stored {
	return stored{Type: typeAvro, Schema: `{"type":"record","name":"R","namespace":"c","fields":[` + strings.Join(fields, ",") + `]}`}
}

// TestAvroCompatibilityLevels checks each level on evolutions whose
// answer the Avro specification settles, including a nullable field
// added without a default (refused: the specification, and Java's check,
// give it no implicit default) and transitive levels that look past the
// latest version.
func TestAvroCompatibilityLevels(t *testing.T) {
	x := `{"name":"x","type":"int"}`
	v1 := record(x)
	withDefault := record(x, `{"name":"y","type":"string","default":"d"}`)
	withoutDefault := record(x, `{"name":"y","type":"string"}`)
	nullable := record(x, `{"name":"y","type":["null","string"]}`)
	nullableDefault := record(x, `{"name":"y","type":["null","string"],"default":null}`)
	promoted := record(`{"name":"x","type":"long"}`)
	empty := record()
	yString := record(`{"name":"x","type":"string","default":"s"}`)
	aliased := record(`{"name":"x2","type":"int","aliases":["x"]}`)
	enumAB := record(`{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}`)
	enumABC := record(`{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}}`)
	nested := func(inner string) stored {
		return record(`{"name":"in","type":["null",{"type":"array","items":{"type":"record","name":"In","fields":[` + inner + `]}}]}`)
	}
	cases := []struct {
		name     string
		level    string
		previous []stored
		next     stored
		ok       bool
	}{
		{"field added with a default", "BACKWARD", []stored{v1}, withDefault, true},
		{"field added without a default", "BACKWARD", []stored{v1}, withoutDefault, false},
		{"nullable field added without a default", "BACKWARD", []stored{v1}, nullable, false},
		{"nullable field added with a null default", "BACKWARD", []stored{v1}, nullableDefault, true},
		{"nullable field added without a default, nested", "BACKWARD", []stored{nested(x)}, nested(x + `,{"name":"z","type":["null","long"]}`), false},
		{"nullable field added with a default, nested", "BACKWARD", []stored{nested(x)}, nested(x + `,{"name":"z","type":["null","long"],"default":null}`), true},
		{"field added without a default, forward", "FORWARD", []stored{v1}, withoutDefault, true},
		{"field added without a default, full", "FULL", []stored{v1}, withoutDefault, false},
		{"field added with a default, full", "FULL", []stored{v1}, withDefault, true},
		{"field dropped", "BACKWARD", []stored{withoutDefault}, v1, true},
		{"field without a default dropped, forward", "FORWARD", []stored{withoutDefault}, v1, false},
		{"field with a default dropped, forward", "FORWARD", []stored{withDefault}, v1, true},
		{"int promoted to long", "BACKWARD", []stored{v1}, promoted, true},
		{"long narrowed to int", "BACKWARD", []stored{promoted}, v1, false},
		{"int promoted to long, full", "FULL", []stored{v1}, promoted, false},
		{"field renamed with an alias", "BACKWARD", []stored{v1}, aliased, true},
		{"enum symbol added", "BACKWARD", []stored{enumAB}, enumABC, true},
		{"enum symbol removed", "BACKWARD", []stored{enumABC}, enumAB, false},
		{"int to string via an empty version", "BACKWARD", []stored{v1, empty}, yString, true},
		{"int to string via an empty version, transitive", "BACKWARD_TRANSITIVE", []stored{v1, empty}, yString, false},
		{"field added without a default, forward transitive", "FORWARD_TRANSITIVE", []stored{withDefault, v1}, withoutDefault, true},
		{"field with a default dropped, full transitive", "FULL_TRANSITIVE", []stored{withoutDefault, withDefault}, v1, false},
		{"anything", "NONE", []stored{v1}, yString, true},
	}
	none := func(Reference) (stored, bool) { return stored{}, false }
	for _, c := range cases {
		for i := range c.previous {
			c.previous[i].ID = i + 1
		}
		msgs, err := compatible(c.level, c.next, c.previous, none)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (len(msgs) == 0) != c.ok {
			t.Errorf("%s (%s): compatible %v, want %v: %v", c.name, c.level, len(msgs) == 0, c.ok, msgs)
		}
	}
}

// TestAvroCompatibilityReferences checks schemas that use a named type
// of another subject's schema.
func TestAvroCompatibilityReferences(t *testing.T) {
	money := stored{ID: 1, Type: typeAvro, Schema: `{"type":"record","name":"Money","namespace":"m","fields":[{"name":"units","type":"long"}]}`}
	ref := []Reference{{Name: "m.Money", Subject: "money", Version: 1}}
	resolve := func(r Reference) (stored, bool) { return money, r.Subject == "money" }
	v1 := stored{ID: 2, Type: typeAvro, References: ref, Schema: `{"type":"record","name":"O","fields":[{"name":"total","type":"m.Money"}]}`}
	v2 := stored{ID: 3, Type: typeAvro, References: ref, Schema: `{"type":"record","name":"O","fields":[{"name":"total","type":"m.Money"},{"name":"tax","type":["null","m.Money"],"default":null}]}`}
	v3 := stored{ID: 4, Type: typeAvro, References: ref, Schema: `{"type":"record","name":"O","fields":[{"name":"total","type":"m.Money"},{"name":"tax","type":["null","m.Money"]}]}`}
	if msgs, err := compatible("BACKWARD", v2, []stored{v1}, resolve); err != nil || len(msgs) != 0 {
		t.Errorf("a referenced type in a field with a default: %v %v", msgs, err)
	}
	if msgs, err := compatible("BACKWARD", v3, []stored{v1}, resolve); err != nil || len(msgs) != 1 || !strings.Contains(msgs[0], "tax") {
		t.Errorf("a referenced type in a field without a default: %v %v, want one message naming tax", msgs, err)
	}
}

// TestAvroCompatibilityAgainstRegistry asks the embedded registry and
// the real one of PROCESSOR_TEST_SCHEMA_REGISTRY_URL (Apicurio, whose
// check is Java Avro's) the same question about random evolutions:
// whether the reader schema may follow the writer's under BACKWARD. The
// answers must agree.
func TestAvroCompatibilityAgainstRegistry(t *testing.T) {
	remote := interop.RegistryURL(t)
	s, err := New(Options{Compatibility: "BACKWARD"})
	if err != nil {
		t.Fatal(err)
	}
	local, err := s.Start(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := fmt.Sprintf("srcompat-%d", time.Now().UnixNano())
	n := 120
	if testing.Short() {
		n = 30
	}
	asked, yes := 0, 0
	for seed := uint64(0); asked < n && seed < uint64(10*n); seed++ {
		writer, reader := compatPair(seed)
		subject := fmt.Sprintf("%s-%d-value", run, seed)
		var answers [2]bool
		skip := false
		for i, base := range []string{local, remote} {
			put(t, base+"/config/"+subject, `{"compatibility":"BACKWARD"}`)
			code, m := call(t, base+"/subjects/"+subject+"/versions", writer)
			if code != 200 {
				skip = true // a schema one of them refuses (a duplicate name in it)
				break
			}
			code, m = call(t, base+"/compatibility/subjects/"+subject+"/versions/latest", reader)
			if code != 200 {
				skip = true
				break
			}
			answers[i], _ = m["is_compatible"].(bool)
		}
		if skip {
			continue
		}
		asked++
		if answers[1] {
			yes++
		}
		if answers[0] != answers[1] {
			t.Errorf("writer %s\nreader %s\nembedded registry: compatible %v; %s: %v", writer, reader, answers[0], remote, answers[1])
		}
	}
	if asked < n {
		t.Fatalf("only %d of %d evolutions were asked of both registries", asked, n)
	}
	if yes == 0 || yes == asked {
		t.Fatalf("%d of %d evolutions compatible: the sample must hold both answers", yes, asked)
	}
	t.Logf("%d evolutions, %d compatible", asked, yes)
}

// call POSTs a schema as the API takes it and returns the status and
// the JSON answer.
func call(t *testing.T, url, schema string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"schema": schema})
	resp, err := http.Post(url, "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// put PUTs a JSON body.
func put(t *testing.T, url, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT %s: HTTP %d", url, resp.StatusCode)
	}
}
