package aggregate

import (
	"context"
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform/internal/groupkey"
	"github.com/streamproc/processor/transform/internal/memstore"
)

// The differential test of the int64 path: update folds with
// groupkey.Num (an int64 while it fits, math/big past it), and each step
// must give what the math/big path alone gives (bigStep, the fold as it
// was before the int64 path): the same stored text byte for byte, or the
// same error.

// bigStep folds in through math/big only: the input's number, the stored
// text (ok: there is one) and the result's bound and text.
func bigStep(fn string, stored string, ok bool, in any) (string, error) {
	x := big.NewRat(1, 1)
	if fn != "count" {
		var err error
		if x, err = groupkey.Number(in); err != nil {
			return "", err
		}
	}
	if ok {
		p, err := groupkey.Parse([]byte(stored))
		if err != nil {
			return "", err
		}
		switch fn {
		case "count", "sum":
			x.Add(x, p)
		case "min":
			if p.Cmp(x) < 0 {
				x = p
			}
		case "max":
			if p.Cmp(x) > 0 {
				x = p
			}
		}
	}
	if err := groupkey.CheckBound(x, "the "+fn); err != nil {
		return "", err
	}
	return groupkey.Format(x), nil
}

// numStep is bigStep as update does it, through groupkey.Num.
func numStep(fn string, stored string, ok bool, in any) (string, error) {
	x := groupkey.IntNum(1)
	if fn != "count" {
		var err error
		if x, err = groupkey.NumOf(in); err != nil {
			return "", err
		}
	}
	if ok {
		p, err := groupkey.ParseNum([]byte(stored))
		if err != nil {
			return "", err
		}
		x = combine(fn, x, p)
	}
	if err := groupkey.CheckNumBound(x, "the "+fn); err != nil {
		return "", err
	}
	return string(x.AppendText(nil)), nil
}

// sameStep runs both paths on one step and fails the test when they
// differ; it returns the agreed text (and whether there is one).
func sameStep(t testing.TB, fn, stored string, ok bool, in any) (string, bool) {
	t.Helper()
	want, werr := bigStep(fn, stored, ok, in)
	got, gerr := numStep(fn, stored, ok, in)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) || got != want {
		t.Fatalf("%s of %#v onto %q (stored: %v): int64 path %q, %v; math/big path %q, %v", fn, in, stored, ok, got, gerr, want, werr)
	}
	return want, werr == nil
}

// intEdge returns an integer near one of int64's edges or zero, or a
// small one: the values whose sums cross the int64 boundary.
func intEdge(r *rand.Rand) int64 {
	d := int64(r.IntN(2000)) - 1000
	switch r.IntN(6) {
	case 0:
		return math.MaxInt64 - int64(r.IntN(1000))
	case 1:
		return math.MinInt64 + int64(r.IntN(1000))
	case 2:
		return math.MaxInt64/2 + d
	case 3:
		return math.MinInt64/2 + d
	case 4:
		return d
	}
	return r.Int64() >> r.IntN(64)
}

// diffInput returns a random input in one of the forms a FIELD's result
// has: mostly JSON integer literals near int64's edges, and -0, 1e2,
// decimals, exponents, integers past int64, ints and *big.Ints, and a
// few texts that are no number.
func diffInput(r *rand.Rand) any {
	i := intEdge(r)
	switch r.IntN(16) {
	case 0:
		return json.Number([]string{"-0", "0", "1e2", "1E+2", "-1e2", "100e-2", "0.5", "-0.0", "1.0", "9223372036854775808", "-9223372036854775809",
			"9223372036854775807", "-9223372036854775808", "18446744073709551616", "1e18", "1e19", "-1e19", "0e5", "007", "+7", "1.5e", "x"}[r.IntN(22)])
	case 1:
		return json.Number(strconv.FormatInt(i, 10) + "." + strconv.Itoa(r.IntN(1000)))
	case 2:
		return json.Number(numberText(r)) // number_test.go's: decimals, exponents, past the bound
	case 3:
		return int(i)
	case 4:
		b := new(big.Int).Mul(big.NewInt(i), big.NewInt(int64(1+r.IntN(4))))
		return b
	case 5:
		return json.Number(strconv.FormatInt(i, 10) + "0") // ten times: mostly past int64
	}
	return json.Number(strconv.FormatInt(i, 10))
}

// Differential: over random sequences of inputs onto one stored value,
// count, sum, min and max through the int64 path give the math/big
// path's stored text byte for byte at every step, and its errors; the
// sums cross int64's edges both ways, up and down.
func TestNumPathMatchesBig(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 2))
	for _, fn := range []string{"count", "sum", "min", "max"} {
		var crossings, bigs int
		for range 300 {
			stored, ok := "", false
			if r.IntN(4) == 0 { // a stored value to start from, maybe not Format's
				stored, ok = []string{"0", "-0", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1.5", "007", "1e2", "1/3", " 5", "abc", ""}[r.IntN(12)], true
			}
			fits := true
			for range 40 {
				text, taken := sameStep(t, fn, stored, ok, diffInput(r))
				if !taken {
					continue
				}
				_, err := strconv.ParseInt(text, 10, 64)
				if now := err == nil; now != fits {
					crossings++
					fits = now
				}
				if err != nil {
					bigs++
				}
				stored, ok = text, true
			}
		}
		t.Logf("%s: %d crossings of int64's edges, %d steps past int64", fn, crossings, bigs)
		if fn == "sum" && crossings < 200 {
			t.Errorf("sum: %d crossings of int64's edges: the generator misses them", crossings)
		}
	}
}

// The sum crosses int64's edge up and back down, and down and back up,
// exactly.
func TestNumPathCrossesInt64(t *testing.T) {
	for _, c := range []struct {
		ins  []string
		want []string
	}{
		{[]string{"9223372036854775807", "1", "-1", "-9223372036854775807"}, []string{"9223372036854775807", "9223372036854775808", "9223372036854775807", "0"}},
		{[]string{"-9223372036854775808", "-1", "1", "9223372036854775807"}, []string{"-9223372036854775808", "-9223372036854775809", "-9223372036854775808", "-1"}},
		{[]string{"9223372036854775807", "9223372036854775807", "0.5", "-18446744073709551614.5"}, []string{"9223372036854775807", "18446744073709551614", "18446744073709551614.5", "0"}},
		{[]string{"1e2", "-0", "2.50", "-2.5"}, []string{"100", "100", "102.5", "100"}},
	} {
		stored, ok := "", false
		for i, in := range c.ins {
			text, taken := sameStep(t, "sum", stored, ok, json.Number(in))
			if !taken || text != c.want[i] {
				t.Fatalf("sum of %v: step %d gave %q, want %q", c.ins, i, text, c.want[i])
			}
			stored, ok = text, true
		}
	}
}

// FuzzNumPath holds the int64 path to the math/big path: fn picks count,
// sum, min or max; stored is the stored value ("" and no value when
// none is set); ins are the inputs' JSON texts, separated by commas.
func FuzzNumPath(f *testing.F) {
	f.Add(uint8(1), "", "9223372036854775807,1,-1,-9223372036854775808")
	f.Add(uint8(1), "-9223372036854775808", "-1,1,-0,1e2")
	f.Add(uint8(1), "9223372036854775807", "0.5,-0.5,1E+2,-1e19")
	f.Add(uint8(0), "9223372036854775807", "")
	f.Add(uint8(2), "-9223372036854775809", "-9223372036854775808,5")
	f.Add(uint8(3), "1.5", "9223372036854775807,18446744073709551616")
	f.Add(uint8(1), "007", "1,2")
	f.Fuzz(func(t *testing.T, fnb uint8, stored, ins string) {
		fn := []string{"count", "sum", "min", "max"}[fnb%4]
		ok := stored != ""
		for _, in := range strings.Split(ins, ",") {
			if text, taken := sameStep(t, fn, stored, ok, json.Number(in)); taken {
				stored, ok = text, true
			}
		}
	})
}

// Differential, through Process: random integer amounts near int64's
// edges, and now and then a decimal or an exponent, summed, counted,
// min'd and max'd per key over records; every output's value and every
// stored entry is the math/big path's text (bigStep's), and a record
// fails where that path fails.
func TestProcessMatchesBig(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 6))
	for _, fn := range []string{"count", "sum", "min", "max"} {
		s := Settings{Function: fn, Store: "s"}
		if fn != "count" {
			s.Field = ".amount"
		}
		tr, err := New(&s)
		if err != nil {
			t.Fatal(err)
		}
		stores := memstore.Stores{}
		ctx := stores.Context(context.Background())
		st, _ := stores.Store("s")
		stored := map[string]string{}
		for i := range 3000 {
			key := "k" + strconv.Itoa(i%3)
			text := strconv.FormatInt(intEdge(r), 10)
			if r.IntN(10) == 0 {
				text = []string{"1e2", "-0", "0.5", "-2.25", "9223372036854775808", "-1e19"}[r.IntN(6)]
			}
			prev, ok := stored[key]
			want, werr := bigStep(fn, prev, ok, json.Number(text))
			out, err := tr.Process(ctx, record.Source{}, rec(key, `{"amount":`+text+`}`, time.Unix(1000, 0)), nil)
			if (err == nil) != (werr == nil) {
				t.Fatalf("%s of %s onto %q: %v, math/big path: %v", fn, text, prev, err, werr)
			}
			if werr != nil {
				continue
			}
			k, _ := groupkey.RecordKey([]byte(key))
			got, _, _ := st.Get(k.Store)
			if v := string(out[0].Value); v != `{"key":"`+key+`","value":`+want+`}` || string(got) != want {
				t.Fatalf("%s of %s onto %q: output %s, stored %q; math/big path %s", fn, text, prev, v, got, want)
			}
			stored[key] = want
		}
	}
}
