package groupkey

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

// Number takes every form a jq result's number has, within the bound,
// and refuses the rest: *BoundError beyond it, another error for what is
// no finite number.
func TestNumberForms(t *testing.T) {
	huge, _ := new(big.Int).SetString("1"+strings.Repeat("0", 308), 10)
	under := new(big.Int).Sub(huge, big.NewInt(1))
	for _, c := range []struct {
		in    any
		want  string // "" for an error
		bound bool   // the error is a *BoundError
	}{
		{json.Number("12.50"), "12.5", false},
		{json.Number("-0"), "0", false},
		{json.Number("0.0e-999999"), "0", false},
		{json.Number("1E+2"), "100", false},
		{json.Number("123456789012345678901234567890"), "123456789012345678901234567890", false},
		{json.Number("1e-30"), "0.000000000000000000000000000001", false},
		{json.Number("1e-31"), "", true},
		{json.Number("10e-31"), "0.000000000000000000000000000001", false},
		{json.Number("9.99e307"), "999" + strings.Repeat("0", 305), false},
		{json.Number("1e308"), "", true},
		{json.Number("0.1e309"), "", true},
		{json.Number("1e99999999999"), "", true},
		{json.Number("1e-99999999999"), "", true},
		{json.Number("1.5e"), "", false},
		{3, "3", false},
		{0.1, "0.1", false},
		{1e300, "1" + strings.Repeat("0", 300), false},
		{math.MaxFloat64, "", true},
		{5e-324, "", true},
		{math.NaN(), "", false},
		{math.Inf(-1), "", false},
		{under, under.String(), false},
		{huge, "", true},
		{new(big.Int).Lsh(big.NewInt(1), 5000), "", true},
		{"7", "", false},
	} {
		x, err := Number(c.in)
		var be *BoundError
		switch {
		case c.want == "" && err == nil:
			t.Errorf("Number(%v) = %s, want an error", c.in, Format(x))
		case c.want == "" && errors.As(err, &be) != c.bound:
			t.Errorf("Number(%v): %v, a bound error: %v", c.in, err, !c.bound)
		case c.want != "" && (err != nil || Format(x) != c.want):
			t.Errorf("Number(%v) = %v, %v; want %s", c.in, x, err, c.want)
		}
	}
}

// An error names a long text by its ends and length, not in full.
func TestBoundErrorClipsText(t *testing.T) {
	_, err := Number(json.Number("1" + strings.Repeat("7", 100_000)))
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "100001 characters") {
		t.Errorf("error %.300v", err)
	}
}

// Format writes at most MaxText bytes for the widest values the bound
// keeps, exactly.
func TestFormatWidest(t *testing.T) {
	for _, s := range []string{"-" + strings.Repeat("9", 308) + "." + strings.Repeat("9", 30), "0." + strings.Repeat("0", 29) + "1"} {
		x, err := Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if got := Format(x); got != s || len(got) > MaxText {
			t.Errorf("Format(%s) = %s", s, got)
		}
	}
}
