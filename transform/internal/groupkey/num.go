package groupkey

import (
	"encoding/json"
	"math/big"
	"strconv"
)

// Num is an exact number as aggregate folds it: an int64 while the value
// is an integer that fits one, a *big.Rat otherwise (an integer past
// int64, a decimal). Counts and sums of integers, the common case, then
// cost a machine addition per record instead of math/big's parse,
// normalisation and formatting. Both forms give the same values and the
// same text: a Num's text (AppendText) is what Format writes for its
// value, whichever form holds it. NumOf and ParseNum take the int64 form
// only for an integer literal's text that fits; Add and Cmp go through
// math/big when either side is a *big.Rat or a sum overflows.
type Num struct {
	r *big.Rat // nil: the value is i
	i int64
}

// IntNum returns i as a Num.
func IntNum(i int64) Num { return Num{i: i} }

// NumOf is Number as a Num: a JSON integer literal that fits int64, an
// int and a *big.Int that fits are read without math/big; the rest go
// through Number, with its errors.
func NumOf(r any) (Num, error) {
	switch n := r.(type) {
	case json.Number:
		if i, ok := intText(string(n)); ok {
			return Num{i: i}, nil
		}
	case int:
		return Num{i: int64(n)}, nil
	case *big.Int:
		if n.IsInt64() {
			return Num{i: n.Int64()}, nil
		}
	}
	x, err := Number(r)
	if err != nil {
		return Num{}, err
	}
	return Num{r: x}, nil
}

// ParseNum is Parse as a Num: a stored integer that fits int64 is read
// without math/big.
func ParseNum(b []byte) (Num, error) {
	if i, ok := intText(string(b)); ok {
		return Num{i: i}, nil
	}
	x, err := Parse(b)
	if err != nil {
		return Num{}, err
	}
	return Num{r: x}, nil
}

// intText reads s when it is an integer as JSON writes one (an optional
// minus, then 0 or digits without a leading zero) and fits int64; not ok
// for anything else, which math/big then reads.
func intText(s string) (int64, bool) {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 19 || (d[0] == '0' && len(d) > 1) {
		return 0, false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.ParseInt(s, 10, 64) // 19 digits may not fit
	return i, err == nil
}

// Add returns a + b, exactly: in int64 unless either is a *big.Rat or
// the sum overflows.
func Add(a, b Num) Num {
	if a.r == nil && b.r == nil {
		s := a.i + b.i
		// Overflow when both have the sign the sum lacks.
		if (a.i^s)&(b.i^s) >= 0 {
			return Num{i: s}
		}
	}
	return Num{r: new(big.Rat).Add(a.rat(), b.rat())}
}

// rat is n's value as a *big.Rat not to be changed.
func (n Num) rat() *big.Rat {
	if n.r != nil {
		return n.r
	}
	return new(big.Rat).SetInt64(n.i)
}

// Cmp compares a and b: -1, 0 or +1 as a < b, a == b, a > b.
func Cmp(a, b Num) int {
	if a.r == nil && b.r == nil {
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	}
	return a.rat().Cmp(b.rat())
}

// CheckNumBound is CheckBound for a Num: an int64 is always within.
func CheckNumBound(n Num, what string) error {
	if n.r == nil {
		return nil
	}
	return CheckBound(n.r, what)
}

// AppendText appends n's text, Format's for its value, to b.
func (n Num) AppendText(b []byte) []byte {
	if n.r == nil {
		return strconv.AppendInt(b, n.i, 10)
	}
	return append(b, Format(n.r)...)
}
