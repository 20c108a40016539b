package txn

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The promise notes the first failure and every failed record (up to
// maxFailures); successes leave nothing.
func TestOutcomesPromise(t *testing.T) {
	out := &outcomes{}
	p := producer{out: out, promise: out.failed}
	ok, bad, worse := &kgo.Record{}, &kgo.Record{}, &kgo.Record{}
	first, second := errors.New("first"), errors.New("second")
	p.promise(ok, nil)
	if out.first() != nil {
		t.Fatalf("after a success: first() = %v, want nil", out.first())
	}
	p.promise(bad, first)
	p.promise(worse, second)
	if out.first() != first {
		t.Errorf("first() = %v, want %v", out.first(), first)
	}
	fs := out.take()
	if len(fs) != 2 || fs[0].Record != bad || fs[0].Err != first || fs[1].Record != worse || fs[1].Err != second {
		t.Errorf("take() = %+v, want the two failures in order", fs)
	}
}

// BenchmarkPromise is the produce promise's cost for an output that was
// produced: it runs once per output record.
func BenchmarkPromise(b *testing.B) {
	out := &outcomes{}
	p := producer{out: out, promise: out.failed}
	r := &kgo.Record{}
	b.ReportAllocs()
	for range b.N {
		p.promise(r, nil)
	}
}
