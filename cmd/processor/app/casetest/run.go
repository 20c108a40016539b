package casetest

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Exit codes of Run, as `processor test` exits.
const (
	ExitPass   = 0 // every case passed
	ExitFail   = 1 // a case failed
	ExitConfig = 2 // a malformed file or configuration
)

// Runner runs the inputs of c, with the file's variables and c's set,
// through the chain, state fresh, and returns what it did with each
// input. An error is a configuration mistake: Run stops with it.
type Runner func(f *File, c *Case) ([]Result, error)

// Run runs every case of f through run and writes PASS name or FAIL
// name with its differences per case, then "N passed, N failed", to out;
// a configuration error is one line to errOut. It returns the exit code.
func Run(f *File, run Runner, out, errOut io.Writer) int {
	passed, failed := 0, 0
	for _, c := range f.Cases {
		got, err := run(f, c)
		if err != nil {
			fmt.Fprintf(errOut, "processor: %s:%d: case %q: %s\n", f.Path, c.Line, c.Name, oneLine(err.Error()))
			return ExitConfig
		}
		if len(got) != len(c.Inputs) {
			fmt.Fprintf(errOut, "processor: %s:%d: case %q: %d results for %d inputs\n", f.Path, c.Line, c.Name, len(got), len(c.Inputs))
			return ExitConfig
		}
		diff := Check(c, got)
		if len(diff) == 0 {
			passed++
			fmt.Fprintf(out, "PASS %s\n", c.Name)
			continue
		}
		failed++
		fmt.Fprintf(out, "FAIL %s (%s:%d)\n", c.Name, f.Path, c.Line)
		for _, d := range diff {
			fmt.Fprintf(out, "    %s\n", d)
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return ExitFail
	}
	return ExitPass
}

// oneLine joins the lines of s.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkDead compares the dead letters, in the order of their inputs.
func checkDead(want []Dead, got []Result) []string {
	type dead struct {
		input int
		d     DeadLetter
	}
	var all []dead
	for i, r := range got {
		if r.Dead != nil {
			all = append(all, dead{i, *r.Dead})
		}
	}
	var diff []string
	if len(all) != len(want) {
		diff = append(diff, fmt.Sprintf("dead letters: expected %d, got %d", len(want), len(all)))
	}
	for i := range max(len(all), len(want)) {
		var w, g string
		if i < len(want) {
			w = want[i].String()
		}
		if i < len(all) {
			g = fmt.Sprintf("input %d, stage %s, error %q", all[i].input, all[i].d.Stage, all[i].d.Error)
		}
		switch {
		case i >= len(all):
			g = "(none)"
		case i >= len(want):
			w = "(none)"
		case want[i].matches(all[i].input, all[i].d):
			continue
		}
		diff = append(diff, fmt.Sprintf("dead letter %d:", i), "    expected: "+w, "    got:      "+g)
	}
	return diff
}

// matches reports whether the dead letter of input is d.
func (d Dead) matches(input int, got DeadLetter) bool {
	return (d.Input == nil || *d.Input == input) && strings.Contains(got.Error, d.Error) && (d.Stage == "" || d.Stage == got.Stage)
}

// String shows what d checks.
func (d Dead) String() string {
	s := "input any"
	if d.Input != nil {
		s = fmt.Sprintf("input %d", *d.Input)
	}
	if d.Stage != "" {
		s += ", stage " + d.Stage
	}
	return s + fmt.Sprintf(", error containing %q", d.Error)
}

// checkInputs compares the inputs that are what (filtered, late).
func checkInputs(what string, want *Inputs, got []Result, is func(Result) bool) []string {
	which := []int{}
	for i, r := range got {
		if is(r) {
			which = append(which, i)
		}
	}
	switch {
	case want.Which == nil && len(which) != want.Count:
		return []string{fmt.Sprintf("%s: expected %d inputs, got %d %v", what, want.Count, len(which), which)}
	case want.Which != nil:
		w := slices.Clone(want.Which)
		slices.Sort(w)
		if !slices.Equal(slices.Compact(w), which) {
			return []string{fmt.Sprintf("%s: expected inputs %v, got %v", what, w, which)}
		}
	}
	return nil
}
