package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The loop spells no environment variable: its messages name settings
// through Options.SettingName, which the processor binds to its variables.
func TestNoVariableNames(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := strings.Index(string(b), "PROCESSOR_"); i >= 0 {
			t.Errorf("%s spells an environment variable at byte %d; name the setting through Options.SettingName", f, i)
		}
	}
}

// Without Options.SettingName, messages name a setting by its option; with
// it, as it says. The names reach the errors a record fails with.
func TestSettingNames(t *testing.T) {
	if got := newSettingNames(nil); got != (settingNames{"Options.OnError", "Options.TransformTimeout", "Options.TransactionTimeout", "Options.MaxCrashAttempts"}) {
		t.Errorf("default names %+v, want the options' names", got)
	}
	if got := newSettingNames(envSettingName); got != (settingNames{"PROCESSOR_ON_ERROR", "PROCESSOR_TRANSFORM_TIMEOUT", "PROCESSOR_TRANSACTION_TIMEOUT", "PROCESSOR_MAX_CRASH_ATTEMPTS"}) {
		t.Errorf("names %+v, want the variables envSettingName gives", got)
	}
	names := newSettingNames(nil)
	te := &timeoutError{err: errors.New("boom"), timeout: 50 * time.Millisecond, setting: names.transformTimeout}
	if want := "boom (Options.TransformTimeout=50ms)"; te.Error() != want {
		t.Errorf("timeoutError = %q, want %q", te.Error(), want)
	}
	le := &limitError{ran: time.Second, budget: 2 * time.Second, names: names}
	if msg := le.Error(); !strings.Contains(msg, "bound the transform with Options.TransformTimeout, or raise Options.TransactionTimeout") {
		t.Errorf("limitError = %q, want it to name the options", msg)
	}
}
