package jq

import (
	"bytes"
	"context"

	"github.com/itchyny/gojq"
)

// fastPath is the jq transform's fast path behind one door: run, which
// Transform.Process calls (and nothing else of it, but its encoder for
// the results run yields). Behind it are the identity program written
// straight from the value's text (canon.go), the byte parser (decode.go),
// the program's leading steps run in place (steps.go, stepsrun.go) with
// their right-hand sides evaluated directly (eval.go, evalops.go), and
// the encoder (encode.go). With FAST=false Process calls none of it
// (slow.go). Programs of other transforms run through Program.Run, the
// steps on a copy. It keeps scratch space: one goroutine at a time.
type fastPath struct {
	parser parser
	enc    encoder
	one    one   // the iterator of an identity program, reused
	canon  canon // the identity program's path from JSON text to JSON text
}

// newFastPath is the fast path for p: the parser makes the outermost
// object with room for the keys p's steps add.
func newFastPath(p *Program) fastPath {
	var f fastPath
	if p.steps != nil {
		f.parser.room = p.steps.grow
	}
	return f
}

// run runs p on value, a record's value, which it does not change. For
// the identity program it may answer with text alone, the one output,
// when that output takes at most limit bytes: the value's own text,
// re-written as the encoder would write its parse (value itself when it
// is already so written). Otherwise it parses value and answers with the
// iterator of p's results, to be encoded by f.enc: the steps change the
// parse in place, and where they cannot decide the record p runs in gojq
// on a new parse. A value that is not JSON is an error.
func (f *fastPath) run(ctx context.Context, p *Program, value []byte, limit int) (text []byte, iter gojq.Iter, err error) {
	if p.identity {
		b, ok := f.canon.encode(value, limit)
		if ok {
			if bytes.Equal(b, value) {
				b = value
			} else {
				b = bytes.Clone(b)
			}
		}
		f.canon.reset()
		if ok {
			if err := ctx.Err(); err != nil {
				return nil, nil, RunError(err)
			}
			return b, nil, nil
		}
	}
	v, err := f.parser.parse(value)
	if err != nil {
		return nil, nil, err
	}
	if p.identity {
		f.one = newOne(ctx, v)
		return nil, &f.one, nil
	}
	if it, ok := p.runOwn(ctx, v); ok {
		return nil, it, nil
	}
	if v, err = f.parser.parse(value); err != nil {
		return nil, nil, err
	}
	return nil, p.code.RunWithContext(ctx, v), nil
}
