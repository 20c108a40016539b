package groupkey

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// The numbers aggregate keeps are exact (math/big) within a bound that
// keeps every output JSON and small: a value x is kept when |x| < 1e308
// (MaxIntDigits digits before the decimal point at most) and x has at
// most MaxPlaces digits after the decimal point. A sum of such inputs
// needs no more places than its inputs, so only its magnitude can leave
// the bound; min and max give one of their inputs. An input or a result
// beyond it fails its record (BoundError), and a value's text is at
// most MaxText bytes.
const (
	// MaxIntDigits: |x| < 10^MaxIntDigits, as for a float64 (whose
	// largest is about 1.8e308).
	MaxIntDigits = 308
	// MaxPlaces: x × 10^MaxPlaces is an integer.
	MaxPlaces = 30
	// MaxText is the longest text Format writes for a kept value: a
	// sign, MaxIntDigits digits, a point and MaxPlaces digits.
	MaxText = 1 + MaxIntDigits + 1 + MaxPlaces
)

// Bound is the bound as errors and docs name it.
const Bound = "|x| < 1e308 with at most 30 digits after the decimal point"

var (
	limit     = new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(MaxIntDigits), nil))
	placesPow = new(big.Int).Exp(big.NewInt(10), big.NewInt(MaxPlaces), nil)
)

// BoundError is a number beyond the bound: What names it (an input's
// text, clipped, or "the sum").
type BoundError struct{ What string }

func (e *BoundError) Error() string {
	return e.What + " is beyond the numbers aggregate keeps (" + Bound + ")"
}

// Number returns a jq result as an exact number within the bound: a
// JSON number's text is checked before it is parsed, so 1e999999 costs
// no more than 1.
func Number(r any) (*big.Rat, error) {
	var s string
	switch n := r.(type) {
	case json.Number:
		s = string(n)
	case int:
		return new(big.Rat).SetInt64(int64(n)), nil
	case *big.Int:
		if n.BitLen() > 1100 { // 10^308 has 1,024 bits
			return nil, &BoundError{What: "an integer of " + strconv.Itoa(n.BitLen()) + " bits"}
		}
		x := new(big.Rat).SetInt(n)
		if !inBound(x) {
			return nil, &BoundError{What: clip(n.String())}
		}
		return x, nil
	case float64:
		s = strconv.FormatFloat(n, 'g', -1, 64)
	default:
		return nil, fmt.Errorf("%v is not a number", r)
	}
	if zero, err := checkText(s); err != nil || zero {
		return new(big.Rat), err // zero, even 0e999999999999
	}
	x, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%s is not a finite number", clip(s))
	}
	return x, nil
}

// CheckBound returns a *BoundError naming what when x is beyond the
// bound.
func CheckBound(x *big.Rat, what string) error {
	if !inBound(x) {
		return &BoundError{What: what}
	}
	return nil
}

func inBound(x *big.Rat) bool {
	if x.IsInt() && x.Num().BitLen() <= 1000 { // below 2^1000 < 1e302: the common case, without allocating
		return true
	}
	return new(big.Rat).Abs(x).Cmp(limit) < 0 && new(big.Int).Rem(placesPow, x.Denom()).Sign() == 0
}

// Parse reads a value Format wrote (a store's), refusing one beyond the
// bound (written by an earlier build, which kept any number) before it
// parses a long text.
func Parse(b []byte) (*big.Rat, error) {
	if len(b) > MaxText {
		return nil, &BoundError{What: "a value of " + strconv.Itoa(len(b)) + " bytes"}
	}
	x, ok := new(big.Rat).SetString(string(b))
	if !ok {
		return nil, fmt.Errorf("%s is not a number", clip(string(b)))
	}
	if !inBound(x) {
		return nil, &BoundError{What: clip(string(b))}
	}
	return x, nil
}

// checkText checks a number's text (JSON's form, or Go's 'g' format of a
// float64) against the bound from its digits and exponent, without
// computing its value, and reports a zero.
func checkText(s string) (zero bool, err error) {
	t := strings.TrimLeft(s, "+-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(t), "e")
	ip, fp, _ := strings.Cut(mant, ".")
	digits, expDigits := ip+fp, strings.TrimLeft(exp, "+-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" || (hasExp && (expDigits == "" || strings.Trim(expDigits, "0123456789") != "")) {
		return false, fmt.Errorf("%s is not a finite number", clip(s))
	}
	first := strings.IndexFunc(digits, func(c rune) bool { return c != '0' })
	if first < 0 {
		return true, nil // whatever its exponent
	}
	last := strings.LastIndexFunc(digits, func(c rune) bool { return c != '0' })
	e := int64(0)
	if hasExp {
		if e, err = strconv.ParseInt(exp, 10, 32); err != nil {
			return false, &BoundError{What: clip(s)} // an exponent beyond ±2^31 and a digit not zero
		}
	}
	// The first significant digit stands for 10^(intDigits-1), the last
	// for 10^-places.
	intDigits := int64(len(ip)-first) + e
	places := int64(last+1-len(ip)) - e
	if intDigits > MaxIntDigits || places > MaxPlaces {
		return false, &BoundError{What: clip(s)}
	}
	return false, nil
}

// clip shortens a number's text for an error message.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:20] + "..." + s[len(s)-12:] + " (" + strconv.Itoa(len(s)) + " characters)"
}

// Format writes x, within the bound, exactly: an integer as one,
// otherwise as a decimal fraction with no trailing zero; JSON either way.
func Format(x *big.Rat) string {
	if x.IsInt() {
		return x.Num().String()
	}
	d, r := x.Denom(), new(big.Int)
	p := big.NewInt(1)
	ten := big.NewInt(10)
	for digits := 1; digits < MaxPlaces; digits++ {
		p.Mul(p, ten)
		if r.Mod(p, d).Sign() == 0 {
			return x.FloatString(digits)
		}
	}
	return x.FloatString(MaxPlaces) // within the bound: exact
}
