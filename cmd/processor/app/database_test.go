package app

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/sink/sinktest"
)

// clearPostgresEnv unsets every PROCESSOR_POSTGRES_* variable for the test.
func clearPostgresEnv(t *testing.T) {
	spec, _ := sink.Default.Lookup("postgres")
	for _, f := range spec.Fields() {
		t.Setenv(sinkVar("postgres", f.Name), "")
	}
}

// The postgres sink's settings come from PROCESSOR_POSTGRES_<SETTING>,
// with the defaults of today's variables.
func TestPostgresSettingsDefaults(t *testing.T) {
	clearPostgresEnv(t)
	t.Setenv("PROCESSOR_POSTGRES_URL", "postgres://db/x")
	dest, err := chooseSink(sink.Default, &config.Config{Sink: "postgres"})
	if err != nil {
		t.Fatal(err)
	}
	s := dest.settings.(*pgsink.Settings)
	if s.URL.Reveal() != "postgres://db/x" || s.Table != "processor_records" || s.DeadLetterTable != "processor_dead_letters" ||
		s.Statement != "" || s.PasswordFile != "" {
		t.Errorf("settings = %+v", s)
	}
	if out, dead := dest.spec.Names(dest.settings); out != "postgres:processor_records" || dead != "postgres:processor_dead_letters" {
		t.Errorf("names = %q, %q", out, dead)
	}
	t.Setenv("PROCESSOR_POSTGRES_URL", "")
	if d, err := chooseSink(sink.Default, &config.Config{Sink: "kafka"}); d != nil || err != nil {
		t.Errorf("kafka sink: %v, %v; want nothing to open", d, err)
	}
}

// The postgres sink without a URL: one line naming PROCESSOR_POSTGRES_URL,
// as unset, saying that the sink needs one.
func TestPostgresSinkWithoutURL(t *testing.T) {
	clearPostgresEnv(t)
	_, err := chooseSink(sink.Default, &config.Config{Sink: "postgres"})
	var cerr *settings.Error
	if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_POSTGRES_URL" || !cerr.Unset || !strings.Contains(err.Error(), "is not set") ||
		!strings.Contains(err.Error(), "PROCESSOR_SINK=postgres needs one") || strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("chooseSink = %v, want an unset PROCESSOR_POSTGRES_URL that PROCESSOR_SINK=postgres needs", err)
	}
}

// A PostgreSQL URL may hold a password: an error about it never shows it.
func TestPostgresURLNeverShown(t *testing.T) {
	clearPostgresEnv(t)
	t.Setenv("PROCESSOR_POSTGRES_URL", "postgres://u:hunter2@db/x")
	_, err := chooseSink(sink.Default, &config.Config{Sink: "kafka"})
	var cerr *settings.Error
	if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_POSTGRES_URL" || !strings.Contains(err.Error(), "unset unless PROCESSOR_SINK=postgres") {
		t.Fatalf("chooseSink = %v, want an error about PROCESSOR_POSTGRES_URL without PROCESSOR_SINK=postgres", err)
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(fmt.Sprintf("%+v", cerr), "hunter2") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// A password file that cannot be read is a configuration error naming
// PROCESSOR_POSTGRES_PASSWORD_FILE and its path.
func TestPostgresPasswordFileUnreadable(t *testing.T) {
	clearPostgresEnv(t)
	t.Setenv("PROCESSOR_POSTGRES_URL", "postgres://u@127.0.0.1:1/x")
	t.Setenv("PROCESSOR_POSTGRES_PASSWORD_FILE", "/nonexistent/pw")
	line, code := postgresConfigLine(t, "postgres://u@127.0.0.1:1/x")
	if code != exitConfig || !strings.Contains(line, `PROCESSOR_POSTGRES_PASSWORD_FILE="/nonexistent/pw" is invalid: want a readable file holding the database password`) {
		t.Errorf("exit %d, line %q", code, line)
	}
}

// PROCESSOR_SINK names kafka or a registered sink: the error lists them
// from the registry.
func TestUnknownSink(t *testing.T) {
	clearPostgresEnv(t)
	_, err := chooseSink(sink.Default, &config.Config{Sink: "mysql"})
	want := "kafka or " + strings.Join(sink.Default.Names(), " or ")
	var cerr *settings.Error
	if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_SINK" || cerr.Value != "mysql" ||
		err.Error() != `PROCESSOR_SINK="mysql" is invalid: want `+want || len(sink.Default.Names()) == 0 {
		t.Fatalf("chooseSink = %v, want PROCESSOR_SINK=\"mysql\" refused, %s wanted", err, want)
	}
}

// PROCESSOR_SINK's values and what each does come from the registry: a
// sink registered is listed with its doc, in the reference as in the
// error for a name that is none.
func TestSinkSettingFromRegistry(t *testing.T) {
	reg := &sink.Registry{}
	spec := sinktest.Spec(&sinktest.Stores{})
	reg.Register("memory", spec)
	reg.Register("other", spec)
	s := sinkSetting(reg, setting{Name: "PROCESSOR_SINK", Doc: "where outputs go"})
	if s.Form != "kafka or memory or other" || s.Doc != "where outputs go; memory: "+spec.Doc+"; other: "+spec.Doc {
		t.Errorf("sinkSetting = %+v", s)
	}
	for _, v := range coreSettings() {
		if v.Name == "PROCESSOR_SINK" && v.Form != sinkChoices(sink.Default) {
			t.Errorf("the reference's PROCESSOR_SINK takes %q, want %q", v.Form, sinkChoices(sink.Default))
		}
	}
	if _, err := chooseSink(reg, &config.Config{Sink: "postgres"}); err == nil || !strings.HasSuffix(err.Error(), "want kafka or memory or other") {
		t.Errorf("chooseSink(postgres) of a registry without it = %v, want kafka or memory or other", err)
	}
}
