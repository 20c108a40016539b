package sink_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/sink/sinktest"
)

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

type badSettings struct {
	X string `setting:"x" doc:"d" form:"f"`
}

// Registering is checked at once, as database/sql.Register is: a name
// taken twice, a name that is not one, a spec without Open, or settings
// tags that cannot work panic.
func TestRegister(t *testing.T) {
	r := &sink.Registry{}
	spec := sinktest.Spec(&sinktest.Stores{})
	r.Register("memory", spec)
	r.Register("other", spec)
	if got := r.Names(); !slices.Equal(got, []string{"memory", "other"}) {
		t.Errorf("Names = %v", got)
	}
	if _, ok := r.Lookup("memory"); !ok {
		t.Error("Lookup(memory) found nothing")
	}
	if _, ok := r.Lookup("kafka"); ok {
		t.Error("Lookup(kafka) found a spec")
	}
	mustPanic(t, "a duplicate", func() { r.Register("memory", spec) })
	mustPanic(t, "a bad name", func() { r.Register("My Sink", spec) })
	mustPanic(t, "no Open", func() { r.Register("noopen", sink.Spec{Names: spec.Names}) })
	bad := spec
	bad.Settings = func() any { return new(badSettings) }
	mustPanic(t, "bad settings tags", func() { r.Register("bad", bad) })
}

// A Typed spec fills and opens with its own settings type.
func TestTypedSpec(t *testing.T) {
	stores := &sinktest.Stores{}
	spec := sinktest.Spec(stores)
	f := spec.Fields()
	if len(f) != 1 || f[0].Name != "STORE" || f[0].Default != "default" {
		t.Fatalf("Fields = %+v", f)
	}
	s := spec.Settings()
	if err := settings.Fill(f, s, func(string) (string, bool) { return "x", true }); err != nil {
		t.Fatal(err)
	}
	dest, closeDest, err := spec.Open(context.Background(), s, sink.Host{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeDest()
	if dest != stores.Get("x") {
		t.Error("Open did not return the store the settings name")
	}
	if out, dead := spec.Names(s); out != "memory:x" || dead != "memory:x:dead" {
		t.Errorf("Names = %q, %q", out, dead)
	}
}

// The contract's errors: one line each, naming what they are about.
func TestErrors(t *testing.T) {
	tp := record.TopicPartition{Topic: "in", Partition: 1}
	fe := &sink.FencedError{From: "pgsink", Partitions: []record.TopicPartition{tp}, Stored: map[record.TopicPartition]int64{tp: 7}}
	if got := fe.Error(); !strings.HasPrefix(got, "pgsink: fenced: the stored offsets of in/1 (now 7) are not") {
		t.Errorf("FencedError = %q", got)
	}
	re := &sink.RowError{From: "pgsink", Index: 2, DeadLetter: true, Input: record.Source{Topic: "in", Partition: 1, Offset: 9}, Err: errors.New("bad")}
	if got := re.Error(); got != "pgsink: dead letter 2 (input in/1@9) refused: bad" || !errors.Is(re, re.Err) {
		t.Errorf("RowError = %q", got)
	}
	pe := &sink.PersistentError{From: "pgsink", Destination: "PostgreSQL", Setting: "TABLE", Check: "it is gone", Attempts: 3,
		Detail: "no table", Err: errors.New("raw")}
	want := "pgsink: committing to PostgreSQL failed 3 times in a row with the same error, which retrying does not fix: no table; check setting TABLE: it is gone"
	if got := pe.Error(); got != want {
		t.Errorf("PersistentError = %q, want %q", got, want)
	}
	if got := pe.Line(func(s string) string { return "VAR_" + s }); !strings.HasSuffix(got, "; check VAR_TABLE: it is gone") {
		t.Errorf("Line = %q", got)
	}
}
