package schematest

import (
	"context"
	"testing"

	"github.com/streamproc/processor/schema"
)

// TestMemory checks ids, versions, idempotent registering and Fail.
func TestMemory(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	a := m.MustRegister("a", schema.Schema{Type: schema.Avro, Text: `"int"`})
	again := m.MustRegister("a", schema.Schema{Type: schema.Avro, Text: `"int"`})
	b := m.MustRegister("a", schema.Schema{Type: schema.Avro, Text: `"long"`})
	other := m.MustRegister("other", schema.Schema{Type: schema.Avro, Text: `"int"`})
	if again.ID != a.ID || again.Version != a.Version || a.ID != 1 || a.Version != 1 || b.ID != 2 || b.Version != 2 || other.ID != 1 || other.Version != 1 {
		t.Fatalf("a %+v again %+v b %+v other %+v", a, again, b, other)
	}
	if l, err := m.Latest(ctx, "a"); err != nil || l.ID != 2 {
		t.Errorf("Latest: %+v %v", l, err)
	}
	if v, err := m.SubjectVersion(ctx, "a", 1); err != nil || v.ID != 1 {
		t.Errorf("SubjectVersion: %+v %v", v, err)
	}
	if s, err := m.SchemaByID(ctx, 2); err != nil || s.Text != `"long"` {
		t.Errorf("SchemaByID: %+v %v", s, err)
	}
	if _, err := m.SchemaByID(ctx, 9); schema.FaultOf(err) != schema.FaultRecord {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := m.Latest(ctx, "none"); schema.FaultOf(err) != schema.FaultSchema {
		t.Errorf("unknown subject: %v", err)
	}
	m.Fail(schema.FaultCredentials)
	if _, err := m.SchemaByID(ctx, 1); schema.FaultOf(err) != schema.FaultCredentials {
		t.Errorf("Fail: %v", err)
	}
	m.Fail("")
	if _, err := m.SchemaByID(ctx, 1); err != nil {
		t.Errorf("after Fail(\"\"): %v", err)
	}
	if n := m.Calls("SchemaByID"); n != 4 {
		t.Errorf("Calls: %d, want 4", n)
	}
}
