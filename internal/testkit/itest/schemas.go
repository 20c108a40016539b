package itest

import (
	"context"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/schema"
)

// SREnv is one Schema Registry a schema test runs against: its URL, as
// the processor is given it, and the test's own client of it.
type SREnv struct {
	Name string
	URL  string
	Reg  schema.Registry
}

// Register registers text of format f under subject.
func (r *SREnv) Register(t testing.TB, subject string, f schema.Format, text string) schema.Subject {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := r.Reg.Register(ctx, subject, schema.Schema{Type: f, Text: text})
	if err != nil {
		t.Fatalf("registering under %s: %v", subject, err)
	}
	return s
}

// Encoder returns an encoder of the registered s.
func (r *SREnv) Encoder(t testing.TB, s schema.Subject) *schema.Encoder {
	t.Helper()
	enc, err := schema.NewEncoder(context.Background(), r.Reg, s, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// SchemaInstance is the processor instance of a schema test: the suite's
// standard instance (BinaryInstance) with value format f in and out, the
// registry r and a jq chain running expr (identity when expr is empty).
func (tg *Target) SchemaInstance(r *SREnv, group, in, out string, f schema.Format, expr string) launch.Instance {
	inst := tg.BinaryInstance(group, group+"-1", in, out)
	inst.Extra = append(inst.Extra, "PROCESSOR_VALUE_FORMAT="+string(f), "PROCESSOR_SCHEMA_REGISTRY_URL="+r.URL)
	if expr != "" {
		inst.Transforms = []string{"jq"}
		inst.Settings = map[string]string{"PROCESSOR_JQ_EXPR": expr}
	}
	return inst
}
