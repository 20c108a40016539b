package app

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/streamproc/processor/cmd/processor/app/casetest"
	"github.com/streamproc/processor/transform"
)

// `processor test FILE` runs the declarative cases of FILE (package
// casetest) through the configured chain as `processor try` runs it: the
// real loop on an in-memory session, state fresh per case. It exits 0
// when every case passed, 1 when one failed, 2 for a malformed file or
// configuration.

// runTest is `processor test` with its arguments; it returns the exit
// code.
func runTest(args []string, reg *transform.Registry, stdout, stderr io.Writer) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "processor: usage: processor test FILE")
		return exitConfig
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "processor: "+oneLine(err.Error()))
		return exitConfig
	}
	f, err := casetest.Parse(args[0], data)
	if err != nil {
		fmt.Fprintln(stderr, "processor: "+oneLine(err.Error()))
		return exitConfig
	}
	return casetest.Run(f, func(f *casetest.File, c *casetest.Case) ([]casetest.Result, error) {
		return runCase(reg, f, c)
	}, stdout, stderr)
}

// runCase runs c's inputs with the file's and c's variables set, and
// puts the environment back after.
func runCase(reg *transform.Registry, f *casetest.File, c *casetest.Case) ([]casetest.Result, error) {
	restore := setEnv(append(append([][2]string{}, f.Env...), c.Env...))
	defer restore()
	cfg, err := loadTryConfig()
	if err != nil {
		return nil, withUnknownVars(reg, err)
	}
	// The cases' verdicts are the output: the loop's own lines only
	// when they warn.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// A file's variables often set up transforms a case's chain
	// replaces: their settings are not worth a warning per case.
	if unknown, _ := findUnknownVars(reg, cfg.Transforms); len(unknown) > 0 {
		if !cfg.AllowUnknownVariables {
			return nil, fmt.Errorf("%s %s", unknown[0], unknownVarSuffix)
		}
		for _, msg := range unknown {
			log.Warn("ignoring an unknown variable: " + msg)
		}
	}
	recs := c.Records(cfg.InputTopics[0], time.Now())
	var stderr bytes.Buffer
	lines, code := tryChain(reg, cfg, recs, nil, log, &stderr)
	if lines == nil {
		msg := strings.TrimSpace(stderr.String())
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, "processor: "), "configuration error: ")
		if code != exitConfig {
			msg = fmt.Sprintf("%s (exit %d)", msg, code)
		}
		return nil, errors.New(msg)
	}
	out := make([]casetest.Result, len(lines))
	for i, l := range lines {
		out[i] = caseResult(l)
	}
	return out, nil
}

// setEnv sets the variables of env and returns what puts them back.
func setEnv(env [][2]string) func() {
	type old struct {
		name, value string
		set         bool
	}
	var olds []old
	for _, kv := range env {
		v, ok := os.LookupEnv(kv[0])
		olds = append(olds, old{kv[0], v, ok})
		_ = os.Setenv(kv[0], kv[1])
	}
	return func() {
		for i := len(olds) - 1; i >= 0; i-- {
			if o := olds[i]; o.set {
				_ = os.Setenv(o.name, o.value)
			} else {
				_ = os.Unsetenv(o.name)
			}
		}
	}
}

// caseResult is a try line as a case's result.
func caseResult(l tryLine) casetest.Result {
	r := casetest.Result{Filtered: l.Filtered, Late: l.Late, Skipped: l.Skipped, NotProcessed: l.NotProcessed}
	for _, o := range l.Closed {
		r.Outputs = append(r.Outputs, caseRecord(o))
	}
	for _, o := range l.Outputs {
		r.Outputs = append(r.Outputs, caseRecord(o))
	}
	if l.DeadLetter != nil {
		r.Dead = &casetest.DeadLetter{Error: l.DeadLetter.Error, Stage: l.DeadLetter.Stage}
	}
	if l.Failed != nil {
		r.Failed = l.Failed.Error
	}
	return r
}

// caseRecord is a printed record as a case's output.
func caseRecord(t tryRecord) casetest.Record {
	r := casetest.Record{Topic: t.Topic, Key: recordBytes(t.Key, t.KeyBase64), Value: recordBytes(t.Value, t.ValueBase64)}
	for _, h := range t.Headers {
		r.Headers = append(r.Headers, [2]string{h.Key, string(recordBytes(h.Value, h.ValueBase64))})
	}
	return r
}

// recordBytes is the bytes of a printed field: its text, or its base64.
func recordBytes(s *string, b64 string) []byte {
	if s != nil {
		return []byte(*s)
	}
	if b, err := base64.StdEncoding.DecodeString(b64); err == nil && b64 != "" {
		return b
	}
	return nil
}
