package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// The one place that names a plugin's variables: a plugin declares its
// settings (package settings) and never sees where their values come
// from; the processor binds each to PROCESSOR_<NAME>_<SETTING>, or
// PROCESSOR_<NAME>_<ALIAS>_<SETTING> for a chain entry used under an
// alias, and shows a setting error with those names.

// pluginPrefix is the common prefix of a plugin's variables:
// PROCESSOR_<NAME>, or PROCESSOR_<NAME>_<ALIAS>.
func pluginPrefix(p settings.Plugin) string {
	s := config.Prefix + "_" + strings.ToUpper(p.Name)
	if p.Alias != "" {
		s += "_" + strings.ToUpper(p.Alias)
	}
	return s
}

// PluginVar returns the environment variable of one setting of plugin p,
// e.g. PROCESSOR_JQ_EXPR, or PROCESSOR_JQ_SECOND_EXPR for the entry
// jq@second.
func PluginVar(p settings.Plugin, setting string) string {
	return pluginPrefix(p) + "_" + setting
}

// SettingNames are the names a chain's errors give settings
// (transform.WithNames): their variables, PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD
// for the limit on one record's outputs, PluginVar for an entry's own.
func SettingNames() transform.Names {
	return transform.Names{Limit: config.EnvName("MAX_OUTPUT_BYTES_PER_RECORD"), Setting: PluginVar}
}

// envLookup returns the lookup that reads p's settings from the
// environment (config.Env, the one reader of it).
func envLookup(p settings.Plugin) settings.Lookup {
	return config.Env(func(setting string) string { return PluginVar(p, setting) })
}

// settingError turns a plugin's setting error into the configuration
// error naming the variable (varError), prefixed by the plugin as the
// messages of a chain entry are ("transform jq@second:
// PROCESSOR_JQ_SECOND_EXPR=... is invalid: ..."). Other errors, and a
// setting error already naming its variable, are returned as they are.
func settingError(err error) error {
	var se *settings.Error
	if !errors.As(err, &se) || se.Var != "" {
		return err
	}
	return fmt.Errorf("%s: %w", se.Plugin, varError(se))
}

// varError is the configuration error of a plugin's setting error: it
// names the variable, and shows every other setting its message names as
// a variable of the same plugin (settings.Error.Bind).
func varError(se *settings.Error) *settings.Error {
	if se.Var != "" {
		return se
	}
	return se.Bind(func(setting string) string { return PluginVar(se.Plugin, setting) })
}
