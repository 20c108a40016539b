package config

// Var is one environment variable of the core settings in the configuration
// reference (what `processor config` prints and docs/configuration.md is
// generated from). Every field comes from the declaration of a Config
// field.
type Var struct {
	// Name is the full variable name, e.g. PROCESSOR_COMMIT_INTERVAL.
	Name string
	// Default is the value used when the variable is unset, written as it
	// would be set (e.g. 100ms, 64MiB, false). It is empty when there is
	// none: the setting is required, off when unset, or derived from
	// others (Doc says which).
	Default string
	// Form is the expected form of a value, as error messages quote it.
	Form string
	// Doc says in one line, without a final period, what the setting does.
	Doc string
}

// Reference lists every variable Config reads, in the order of Config's
// fields. It is built from their declarations (Fields: setting, default,
// form, doc), so it cannot drift from what Load reads. Each call returns a
// new slice.
func Reference() []Var {
	fields := Fields()
	vars := make([]Var, len(fields))
	for i, f := range fields {
		vars[i] = Var{Name: EnvName(f.Name), Default: f.Default, Form: f.Form, Doc: f.Doc}
	}
	return vars
}

// Vars returns the names of the environment variables that Config reads,
// e.g. PROCESSOR_GROUP, in Reference's order, so a caller can point out
// unknown ones (typos).
func Vars() []string {
	ref := Reference()
	names := make([]string, len(ref))
	for i, v := range ref {
		names[i] = v.Name
	}
	return names
}
