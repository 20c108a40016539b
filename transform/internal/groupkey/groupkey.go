// Package groupkey evaluates the BY setting of the stateful built-ins
// (aggregate, dedupe): a jq expression on the JSON value whose first
// result is a record's group key or id, or, unset, the record's key.
package groupkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform/jq"
)

// By is a compiled BY setting.
type By struct {
	prog *jq.Program // nil: the record key
}

// Compile compiles expr; an empty expr means the record key.
func Compile(expr string) (*By, error) {
	if expr == "" {
		return &By{}, nil
	}
	p, err := jq.Compile(expr)
	if err != nil {
		return nil, err
	}
	return &By{prog: p}, nil
}

// NeedsValue reports whether Key reads the parsed value.
func (b *By) NeedsValue() bool { return b.prog != nil }

// Key returns rec's group key: raw is what the output key and the store
// key hold (a string's text, or another value's JSON), js its JSON form.
// v is rec's parsed value when NeedsValue.
func (b *By) Key(ctx context.Context, rec *kgo.Record, v any) (raw, js []byte, err error) {
	if b.prog == nil {
		if rec.Key == nil {
			return nil, nil, errors.New("the record has no key to group by; set BY to a jq expression on the value")
		}
		js, err = json.Marshal(string(rec.Key))
		return rec.Key, js, err
	}
	r, err := First(ctx, b.prog, v)
	if err != nil {
		return nil, nil, fmt.Errorf("BY: %w", err)
	}
	if r == nil {
		return nil, nil, errors.New("BY: the expression gave null for the record")
	}
	js, err = json.Marshal(r)
	if err != nil {
		return nil, nil, fmt.Errorf("BY: encoding the key: %w", err)
	}
	if s, ok := r.(string); ok {
		return []byte(s), js, nil
	}
	return js, js, nil
}

// First returns the first result of prog on v; no result is an error.
func First(ctx context.Context, prog *jq.Program, v any) (any, error) {
	iter := prog.Run(ctx, v)
	r, ok := iter.Next()
	if !ok {
		return nil, errors.New("the expression gave no result for the record")
	}
	if err, isErr := r.(error); isErr {
		return nil, jq.RunError(err)
	}
	return r, nil
}

// Number returns a jq result as an exact number.
func Number(r any) (*big.Rat, error) {
	var s string
	switch n := r.(type) {
	case json.Number:
		s = string(n)
	case int:
		return new(big.Rat).SetInt64(int64(n)), nil
	case *big.Int:
		return new(big.Rat).SetInt(n), nil
	case float64:
		s = strconv.FormatFloat(n, 'g', -1, 64)
	default:
		return nil, fmt.Errorf("%v is not a number", r)
	}
	x, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%s is not a finite number", s)
	}
	return x, nil
}

// Format writes x exactly: an integer as one, otherwise as a decimal
// fraction (every sum of decimal numbers has one), or a/b if none is
// short enough.
func Format(x *big.Rat) string {
	if x.IsInt() {
		return x.Num().String()
	}
	d, ten, r := new(big.Int).Set(x.Denom()), big.NewInt(10), new(big.Int)
	p := big.NewInt(1)
	for digits := 1; digits <= 400; digits++ {
		p.Mul(p, ten)
		if r.Mod(p, d).Sign() == 0 {
			return x.FloatString(digits)
		}
	}
	return x.String()
}
