package itest

import (
	"testing"

	"github.com/streamproc/processor/transform"
)

// FuncChain is a chain with the one transform fn, named name: the chain
// of a test whose transform is a function of its own.
func FuncChain(t testing.TB, name string, fn transform.Func) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register(name, transform.Plain("", func() (transform.Transform, error) { return fn, nil }))
	c, err := reg.Build([]transform.Entry{{Name: name}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
