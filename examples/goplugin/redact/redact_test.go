package redact

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/transformtest"
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

// The settings as the processor builds them: MASK defaults to ***, and
// FIELDS is required.
func TestSettingsThroughRegistry(t *testing.T) {
	c, err := transformtest.Build("redact", map[string]string{"FIELDS": "email"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Process(context.Background(), transform.Source{}, &kgo.Record{Value: []byte(`{"email":"a@b.c"}`)}, nil)
	if err != nil || len(out) != 1 || string(out[0].Value) != `{"email":"***"}` {
		t.Errorf("got %v, %v", out, err)
	}
	for _, given := range []map[string]string{nil, {"FIELDS": ""}, {"FIELDS": " , "}} {
		_, err = transformtest.Build("redact", given)
		var se *settings.Error
		if !errors.As(err, &se) || se.Field != "FIELDS" || !strings.Contains(err.Error(), "want comma-separated top-level JSON fields") {
			t.Errorf("%v: %v", given, err)
		}
	}
}
