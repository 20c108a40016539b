package config_test

import (
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
)

// jqSettings are a transform's settings, read the way the processor reads
// them: Env bound to the variables of PROCESSOR_JQ or PROCESSOR_JQ_SECOND.
type jqSettings struct {
	Filter  string        `setting:"FILTER" default:"." doc:"the filter" form:"a jq filter, e.g. .payload | {id}"`
	Timeout time.Duration `setting:"TIMEOUT" default:"1s" doc:"the deadline" form:"a Go duration such as 100ms, per record"`
	Workers int           `setting:"WORKERS" default:"2" doc:"the workers" form:"a number of workers from 1 to 64"`
	Fields  []string      `setting:"FIELDS" doc:"the fields" form:"comma-separated field names"`
	Strict  bool          `setting:"STRICT" doc:"strictness" form:"true or false"`
	Ratio   float64       `setting:"RATIO" doc:"a ratio" form:"a number such as 0.5"`
	// Preset is set by the constructor and has no default.
	Preset string `setting:"PRESET" doc:"a preset" form:"any text"`
}

func newJQSettings() *jqSettings { return &jqSettings{Preset: "from-go"} }

// under names each setting PREFIX_SETTING, as the processor names a
// plugin's variables.
func under(prefix string) func(string) string {
	return func(setting string) string { return prefix + "_" + setting }
}

// Env reads each setting from its variable and no other: an aliased entry
// only its own, never an unprefixed name.
func TestEnvReadsOnlyTheBoundVariables(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		env    map[string]string // full names
		want   jqSettings
	}{
		{name: "defaults", prefix: "PROCESSOR_JQ", want: jqSettings{Filter: ".", Timeout: time.Second, Workers: 2, Preset: "from-go"}},
		{
			name:   "every field set",
			prefix: "PROCESSOR_JQ",
			env: map[string]string{
				"PROCESSOR_JQ_FILTER": ".a", "PROCESSOR_JQ_TIMEOUT": "250ms", "PROCESSOR_JQ_WORKERS": "8",
				"PROCESSOR_JQ_FIELDS": "id,name", "PROCESSOR_JQ_STRICT": "true", "PROCESSOR_JQ_RATIO": "0.5", "PROCESSOR_JQ_PRESET": "from-env",
			},
			want: jqSettings{Filter: ".a", Timeout: 250 * time.Millisecond, Workers: 8, Fields: []string{"id", "name"},
				Strict: true, Ratio: 0.5, Preset: "from-env"},
		},
		{
			name:   "an aliased entry reads only its own variables",
			prefix: "PROCESSOR_JQ_SECOND",
			env: map[string]string{
				"PROCESSOR_JQ_FILTER": ".first", "PROCESSOR_JQ_WORKERS": "9",
				"PROCESSOR_JQ_SECOND_FILTER": ".second",
			},
			want: jqSettings{Filter: ".second", Timeout: time.Second, Workers: 2, Preset: "from-go"},
		},
		{
			name:   "the unaliased entry does not read the aliased variables",
			prefix: "PROCESSOR_JQ",
			env:    map[string]string{"PROCESSOR_JQ_SECOND_FILTER": ".second"},
			want:   jqSettings{Filter: ".", Timeout: time.Second, Workers: 2, Preset: "from-go"},
		},
		{
			name:   "unprefixed names are not read",
			prefix: "PROCESSOR_JQ_SECOND",
			env:    map[string]string{"FILTER": ".bare", "WORKERS": "7", "STRICT": "true", "PRESET": "bare", "TIMEOUT": "never"},
			want:   jqSettings{Filter: ".", Timeout: time.Second, Workers: 2, Preset: "from-go"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			s := newJQSettings()
			if err := settings.Fill(settings.Fields(s), s, config.Env(under(tt.prefix))); err != nil {
				t.Fatalf("Fill: %v", err)
			}
			if !reflect.DeepEqual(*s, tt.want) {
				t.Errorf("settings:\n got %+v\nwant %+v", *s, tt.want)
			}
		})
	}
}

// Env tells a variable set to the empty string from one not set.
func TestEnvGivesTheEmptyValue(t *testing.T) {
	clearEnv(t)
	lookup := config.Env(config.EnvName)
	if v, ok := lookup("GROUP"); ok || v != "" {
		t.Errorf("unset: %q, %v", v, ok)
	}
	t.Setenv("PROCESSOR_GROUP", "")
	if v, ok := lookup("GROUP"); !ok || v != "" {
		t.Errorf("set to empty: %q, %v", v, ok)
	}
	t.Setenv("PROCESSOR_GROUP", " g ")
	if v, ok := lookup("GROUP"); !ok || v != " g " {
		t.Errorf("set: %q, %v, want it as written", v, ok)
	}
}

// A value that does not parse is an error quoting the form, bound to the
// variable: one line naming it.
func TestEnvSettingErrors(t *testing.T) {
	tests := []struct {
		name     string
		prefix   string
		key      string // full variable name
		value    string
		wantWant string // the exact expected form
	}{
		{"form of a duration is quoted", "PROCESSOR_JQ", "PROCESSOR_JQ_TIMEOUT", "soon", "a Go duration such as 100ms, per record"},
		{"form of an int is quoted", "PROCESSOR_JQ_SECOND", "PROCESSOR_JQ_SECOND_WORKERS", "many", "a number of workers from 1 to 64"},
		{"bool", "PROCESSOR_JQ", "PROCESSOR_JQ_STRICT", "yes please", "true or false"},
		{"float", "PROCESSOR_JQ", "PROCESSOR_JQ_RATIO", "half", "a number such as 0.5"},
		{"empty value", "PROCESSOR_JQ", "PROCESSOR_JQ_TIMEOUT", "", "a Go duration such as 100ms, per record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tt.key, tt.value)
			s := newJQSettings()
			err := settings.Fill(settings.Fields(s), s, config.Env(under(tt.prefix)))
			var se *settings.Error
			if !errors.As(err, &se) {
				t.Fatalf("Fill error %v (%T) is not a *settings.Error", err, err)
			}
			b := se.Bind(under(tt.prefix))
			if b.Var != tt.key || b.Value != tt.value || b.Want.String() != tt.wantWant {
				t.Errorf("error = %+v, want Var %s, Value %q, Want %q", *b, tt.key, tt.value, tt.wantWant)
			}
			if msg, want := b.Error(), tt.key+"="+strconv.Quote(tt.value)+" is invalid: want "+tt.wantWant; msg != want {
				t.Errorf("message = %q, want %q", msg, want)
			}
		})
	}
}

// Defaults is the configuration of the declared defaults alone, as Load
// reads it from an environment without PROCESSOR_* variables (before the
// defaults Load derives from others).
func TestDefaultsAreWhatReadGivesUnset(t *testing.T) {
	clearEnv(t)
	got, err := config.Read(config.Env(config.EnvName))
	if err != nil {
		t.Fatal(err)
	}
	if d := config.Defaults(); !reflect.DeepEqual(d, got) {
		t.Errorf("Defaults() = %+v\nwant %+v", d, got)
	}
	if got.CommitInterval != 100*time.Millisecond || got.Compression != "snappy" || got.KeyFormat != "raw" || len(got.Transforms) != 1 {
		t.Errorf("Defaults() = %+v", got)
	}
}
