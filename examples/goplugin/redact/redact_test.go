package redact

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/transform"
)

func TestRedact(t *testing.T) {
	tr, err := New(&Settings{Fields: "card_number, email", Mask: "***"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Value: []byte(`{"card_number":"4111111111111111","email":"a@b.c","amount_cents":100}`)}
	out, err := tr.Process(context.Background(), transform.Source{}, rec, nil)
	if err != nil || len(out) != 1 {
		t.Fatal(out, err)
	}
	if got, want := string(out[0].Value), `{"amount_cents":100,"card_number":"***","email":"***"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := tr.Process(context.Background(), transform.Source{}, &kgo.Record{Value: []byte(`[1]`)}, nil); err == nil {
		t.Error("a value that is not an object should fail")
	}
}

// The settings come from PROCESSOR_REDACT_*, as the processor reads them.
func TestSettingsFromEnv(t *testing.T) {
	t.Setenv("PROCESSOR_REDACT_FIELDS", "email")
	spec, ok := transform.Default.Lookup("redact")
	if !ok {
		t.Fatal(`"redact" is not registered`)
	}
	s := spec.Settings()
	if err := config.Process(config.TransformPrefix("redact", ""), s); err != nil {
		t.Fatal(err)
	}
	if got := s.(*Settings); got.Fields != "email" || got.Mask != "***" {
		t.Errorf("settings: %+v", got)
	}
	_, err := New(&Settings{})
	var cerr *config.Error
	if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_REDACT_FIELDS" {
		t.Errorf("no fields: %v", err)
	}
}
