package app

import (
	"errors"
	"testing"

	"github.com/streamproc/processor/settings"
)

// A plugin's settings are PROCESSOR_<NAME>_<SETTING>, with the alias of a
// chain entry after the name, in upper case.
func TestPluginVar(t *testing.T) {
	tests := []struct{ name, alias, want string }{
		{"jq", "", "PROCESSOR_JQ"},
		{"jq", "second", "PROCESSOR_JQ_SECOND"},
		{"Route_v2", "Alt_1", "PROCESSOR_ROUTE_V2_ALT_1"},
		{"identity", "", "PROCESSOR_IDENTITY"},
	}
	for _, tt := range tests {
		p := settings.Plugin{Kind: "transform", Name: tt.name, Alias: tt.alias}
		if got := pluginPrefix(p); got != tt.want {
			t.Errorf("pluginPrefix(%q, %q) = %q, want %q", tt.name, tt.alias, got, tt.want)
		}
		if got := PluginVar(p, "EXPR"); got != tt.want+"_EXPR" {
			t.Errorf("PluginVar(%q, %q, EXPR) = %q, want %q", tt.name, tt.alias, got, tt.want+"_EXPR")
		}
	}
}

// settingError names the variable of the setting and of every setting its
// message names, from the error's fields; other errors pass unchanged.
func TestSettingError(t *testing.T) {
	se := &settings.Error{Plugin: settings.Plugin{Kind: "transform", Name: "headers", Alias: "h"}, Field: "REMOVE", Value: "a",
		Want: settings.Say("header keys"), Detail: settings.Say(", and none also in ", settings.Ref("SET"))}
	err := settingError(se)
	var cerr *settings.Error
	if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_HEADERS_H_REMOVE" {
		t.Fatalf("got %v, want a *settings.Error for PROCESSOR_HEADERS_H_REMOVE", err)
	}
	if got, want := err.Error(), `transform headers@h: PROCESSOR_HEADERS_H_REMOVE="a" is invalid: want header keys, and none also in PROCESSOR_HEADERS_H_SET`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	other := errors.New("other")
	if settingError(other) != other {
		t.Error("another error was changed")
	}
}

// A running chain's errors name settings by their variables.
func TestSettingNames(t *testing.T) {
	n := SettingNames()
	if n.Limit != "PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD" {
		t.Errorf("Limit = %q", n.Limit)
	}
	if got := n.Setting(settings.Plugin{Kind: "transform", Name: "wasm", Alias: "x"}, "TIMEOUT"); got != "PROCESSOR_WASM_X_TIMEOUT" {
		t.Errorf("Setting = %q", got)
	}
}

// varError names the variable without the plugin's prefix.
func TestVarError(t *testing.T) {
	se := &settings.Error{Plugin: settings.Plugin{Kind: "sink", Name: "postgres"}, Field: "URL", Unset: true, Want: settings.Say("a PostgreSQL URL")}
	if got, want := varError(se).Error(), "PROCESSOR_POSTGRES_URL is not set: want a PostgreSQL URL"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A secret setting's error names the variable and not the value.
func TestVarErrorSecret(t *testing.T) {
	se := &settings.Error{Plugin: settings.Plugin{Kind: "sink", Name: "postgres"}, Field: "URL", Secret: true, Want: settings.Say("a URL")}
	if got, want := varError(se).Error(), "PROCESSOR_POSTGRES_URL is invalid (its value is not shown): want a URL"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
