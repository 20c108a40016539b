package aggregate

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform/internal/groupkey"
	"github.com/streamproc/processor/transform/internal/memstore"
)

// digits returns n random decimal digits, the first not zero when lead.
func digits(r *rand.Rand, n int, lead bool) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.IntN(10))
	}
	if lead && n > 0 && b[0] == '0' {
		b[0] = '1' + byte(r.IntN(9))
	}
	return string(b)
}

// numberText returns a random JSON number: integers past 2^63, many
// digits, -0, tiny and huge exponents, and ordinary amounts.
func numberText(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(3) == 0 {
		b.WriteByte('-')
	}
	if r.IntN(8) == 0 { // near the bound: two of them sum past it
		b.WriteString("9." + digits(r, 5, false) + "e307")
		return b.String()
	}
	switch r.IntN(4) {
	case 0:
		b.WriteString("0")
	case 1:
		b.WriteString(digits(r, 1+r.IntN(4), true))
	default:
		b.WriteString(digits(r, 1+r.IntN(45), true))
	}
	if r.IntN(2) == 0 {
		b.WriteString("." + digits(r, 1+r.IntN([]int{3, 40}[r.IntN(2)]), false))
	}
	if r.IntN(2) == 0 {
		b.WriteString([]string{"e", "E", "e+", "e-", "E-"}[r.IntN(5)])
		switch r.IntN(5) {
		case 0:
			b.WriteString(strconv.Itoa(r.IntN(40)))
		case 1:
			b.WriteString(strconv.Itoa(260 + r.IntN(80)))
		case 2:
			b.WriteString(strconv.Itoa(r.IntN(1_000_000)))
		case 3:
			b.WriteString("0" + digits(r, 25, false)) // beyond any int
		default:
			b.WriteString(strconv.Itoa(r.IntN(8)))
		}
	}
	return b.String()
}

var tenTo30 = new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)

// reference returns text's exact value and whether it is within the
// bound, computed apart from groupkey: math/big over the text when its
// exponent is moderate, and from the exponent alone when it is not.
func reference(text string) (*big.Rat, bool) {
	mant, exp, _ := strings.Cut(strings.ToLower(text), "e")
	zero := strings.Trim(mant, "-0.") == ""
	if e, err := strconv.Atoi(exp); exp != "" && (err != nil || e > 5000 || e < -5000) {
		return new(big.Rat), zero // a digit times 10^±5000 is beyond; zero is 0
	}
	x, ok := new(big.Rat).SetString(text)
	if !ok {
		panic(text)
	}
	return x, inBound(x)
}

func inBound(x *big.Rat) bool {
	lim, _ := new(big.Rat).SetString("1e308")
	return new(big.Rat).Abs(x).Cmp(lim) < 0 && new(big.Int).Rem(tenTo30, x.Denom()).Sign() == 0
}

// Property: over random numeric text, sum, min and max emit only valid
// JSON, each value at most groupkey.MaxText bytes and equal to math/big's
// fold of the inputs taken; an input or a result beyond the bound fails
// its record with an error naming FIELD and the bound, and leaves the
// aggregate as it was.
func TestNumbersStayJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(38, 4))
	for _, fn := range []string{"sum", "min", "max"} {
		tr, err := New(&Settings{Function: fn, Field: ".amount", Store: "s"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := memstore.Stores{}.Context(context.Background())
		want := map[string]*big.Rat{}
		var failed, taken, byResult int
		for i := range 6000 {
			text, key := numberText(r), "k"+strconv.Itoa(i%7)
			rec := &kgo.Record{Key: []byte(key), Value: []byte(`{"amount":` + text + `}`), Timestamp: time.Unix(1000, 0)}
			x, ok := reference(text)
			next := fold(fn, want[key], x)
			if ok && !inBound(next) {
				ok = false
				byResult++
			}
			out, err := tr.Process(ctx, record.Source{}, rec, nil)
			if !ok {
				if err == nil || !strings.Contains(err.Error(), "FIELD .amount") || !strings.Contains(err.Error(), groupkey.Bound) {
					t.Fatalf("%s %s after %v: error %v, want one naming FIELD .amount and the bound", fn, text, want[key], err)
				}
				failed++
				continue
			}
			if err != nil {
				t.Fatalf("%s %s after %v: %v", fn, text, want[key], err)
			}
			want[key] = next
			taken++
			checkValue(t, out[0].Value, next)
		}
		t.Logf("%s: %d inputs taken, %d failed for the bound (%d by the result alone)", fn, taken, failed, byResult)
		if failed < 500 || taken < 2000 || (fn == "sum") != (byResult > 0) {
			t.Errorf("%s: %d taken, %d failed: the generator misses a side", fn, taken, failed)
		}
	}
}

// fold is the reference's sum, min or max.
func fold(fn string, prev, x *big.Rat) *big.Rat {
	if prev == nil {
		return x
	}
	switch fn {
	case "sum":
		return new(big.Rat).Add(prev, x)
	case "min":
		if prev.Cmp(x) < 0 {
			return prev
		}
	case "max":
		if prev.Cmp(x) > 0 {
			return prev
		}
	}
	return x
}

// checkValue asserts an output is valid JSON whose "value" is small and
// equals want.
func checkValue(t *testing.T, value []byte, want *big.Rat) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var v struct{ Value json.Number }
	if !json.Valid(value) || dec.Decode(&v) != nil {
		t.Fatalf("output %.200s is not JSON", value)
	}
	got, ok := new(big.Rat).SetString(string(v.Value))
	if !ok || got.Cmp(want) != 0 || len(v.Value) > groupkey.MaxText {
		t.Fatalf("output value %.200s (%d bytes), want %s", v.Value, len(v.Value), want.FloatString(30))
	}
}

// The two numbers: 1e999999 and 1e-401 fail their records at
// once, naming FIELD and the bound, and the key's sum goes on from the
// inputs taken.
func TestNumbersBeyondTheBound(t *testing.T) {
	tr, _ := New(&Settings{Function: "sum", Field: ".amount", Store: "s"})
	ctx := memstore.Stores{}.Context(context.Background())
	now := time.Unix(1000, 0)
	startAt := time.Now()
	for _, c := range []struct{ in, out, err string }{
		{`1.5`, `{"key":"k","value":1.5}`, ""},
		{`1e999999`, "", "FIELD .amount: 1e999999 is beyond the numbers aggregate keeps (" + groupkey.Bound + ")"},
		{`1e-401`, "", "FIELD .amount: 1e-401 is beyond"},
		{`9e307`, `{"key":"k","value":9` + strings.Repeat("0", 306) + `1.5}`, ""},
		{`9e307`, "", "FIELD .amount: the sum is beyond"},
		{`-9e307`, `{"key":"k","value":1.5}`, ""},
		{`0.` + strings.Repeat("0", 29) + `1`, `{"key":"k","value":1.500000000000000000000000000001}`, ""},
		{`-0`, `{"key":"k","value":1.500000000000000000000000000001}`, ""},
		{`0e999999999999`, `{"key":"k","value":1.500000000000000000000000000001}`, ""},
	} {
		out, err := tr.Process(ctx, record.Source{}, rec("k", `{"amount":`+c.in+`}`, now), nil)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.in, err, c.err)
		case c.err == "" && (err != nil || string(out[0].Value) != c.out):
			t.Errorf("%s: %v %v, want %s", c.in, out, err, c.out)
		}
	}
	if d := time.Since(startAt); d > time.Second {
		t.Errorf("took %v", d)
	}
}

// A value beyond the bound that an earlier build stored fails the key's
// records, without parsing a megabyte each time.
func TestStoredValueBeyondTheBound(t *testing.T) {
	tr, _ := New(&Settings{Function: "sum", Field: ".amount", Store: "s"})
	stores := memstore.Stores{}
	ctx := stores.Context(context.Background())
	k, _ := groupkey.RecordKey([]byte("k"))
	st, _ := stores.Store("s")
	for _, v := range []string{"1" + strings.Repeat("0", 1_000_000), "1/" + "1" + strings.Repeat("0", 401)} {
		if err := st.Put(k.Store, []byte(v), time.Time{}); err != nil {
			t.Fatal(err)
		}
		_, err := tr.Process(ctx, record.Source{}, rec("k", `{"amount":1}`, time.Unix(1000, 0)), nil)
		if err == nil || !strings.Contains(err.Error(), "the store's sum of this key") {
			t.Errorf("stored %.20s...: %v", v, err)
		}
	}
}
