package headers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform/transformtest"
)

func newHeaders(t testing.TB, s Settings) *Transform {
	t.Helper()
	tr, err := New(&s)
	if err != nil {
		t.Fatal(err)
	}
	return tr.(*Transform)
}

func hdrs(kv ...string) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for i := 0; i < len(kv); i += 2 {
		hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return hs
}

func str(hs []kgo.RecordHeader) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(h.Key + "=" + string(h.Value) + ";")
	}
	return b.String()
}

func apply(t *testing.T, tr *Transform, in []kgo.RecordHeader) []kgo.RecordHeader {
	t.Helper()
	r := &kgo.Record{Headers: in}
	out, err := tr.Process(context.Background(), record.Source{}, r, nil)
	if err != nil || len(out) != 1 || out[0] != r {
		t.Fatalf("%v, %v", out, err)
	}
	return r.Headers
}

func TestSetAndRemove(t *testing.T) {
	tr := newHeaders(t, Settings{Set: "source=eu, schema=v2,empty=,eq=a=b", Remove: "debug,trace"})
	in := hdrs("debug", "1", "keep", "k", "schema", "v1", "trace", "t", "schema", "v0")
	got := apply(t, tr, in)
	if want := "keep=k;source=eu;schema=v2;empty=;eq=a=b;"; str(got) != want {
		t.Errorf("got %s, want %s", str(got), want)
	}
	if str(in) != "debug=1;keep=k;schema=v1;trace=t;schema=v0;" {
		t.Errorf("the input header slice was modified: %s", str(in))
	}
	if got := apply(t, tr, nil); str(got) != "source=eu;schema=v2;empty=;eq=a=b;" {
		t.Errorf("no headers: %s", str(got))
	}
}

func TestRemoveOnly(t *testing.T) {
	tr := newHeaders(t, Settings{Remove: "a"})
	in := hdrs("b", "1")
	if got := apply(t, tr, in); &got[0] != &in[0] {
		t.Error("nothing to remove: the headers should be left alone")
	}
	if got := apply(t, tr, hdrs("a", "1")); got != nil {
		t.Errorf("all removed: %s", str(got))
	}
	if got := apply(t, tr, hdrs("a", "1", "b", "2", "a", "3")); str(got) != "b=2;" {
		t.Errorf("got %s", str(got))
	}
}

func TestNoAllocations(t *testing.T) {
	tr := newHeaders(t, Settings{Set: "source=eu", Remove: "debug"})
	in := hdrs("debug", "1", "keep", "k")
	r := &kgo.Record{}
	out := make([]*kgo.Record, 0, 1)
	n := testing.AllocsPerRun(10_000, func() {
		r.Headers = in
		_, _ = tr.Process(context.Background(), record.Source{}, r, out[:0])
	})
	if n > 0.01 {
		t.Errorf("%.3f allocations per record, want amortized none", n)
	}
}

// Every bad setting is a one-line *settings.Error naming the
// setting, its value and the expected form.
func TestSettingErrors(t *testing.T) {
	for _, c := range []struct {
		s    map[string]string
		want string
	}{
		{map[string]string{}, "setting SET is not set: want comma-separated key=value pairs with distinct, non-empty keys, e.g. source=eu,schema=v2 (values cannot contain commas); or REMOVE set"},
		{map[string]string{"SET": "novalue"}, `setting SET="novalue" is invalid: want comma-separated key=value pairs`},
		{map[string]string{"SET": "=v"}, `setting SET="=v" is invalid`},
		{map[string]string{"SET": "a=1,a=2"}, `setting SET="a=1,a=2" is invalid: want comma-separated key=value pairs with distinct, non-empty keys`},
		{map[string]string{"SET": "a=1,"}, `setting SET="a=1," is invalid`},
		{map[string]string{"REMOVE": "a,,b"}, `setting REMOVE="a,,b" is invalid: want comma-separated header keys`},
		{map[string]string{"SET": "a=1", "REMOVE": "a"}, `setting REMOVE="a" is invalid: want comma-separated header keys, e.g. debug,trace-id, and none also in SET ("a" is in both)`},
	} {
		_, err := transformtest.Build("headers", c.s)
		var se *settings.Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v, want a one-line *settings.Error containing %q", c.s, err, c.want)
		}
	}
}

func BenchmarkHeaders(b *testing.B) {
	tr := newHeaders(b, Settings{Set: "source=eu,schema=v2", Remove: "debug"})
	in := hdrs("debug", "1", "keep", "k", "trace-id", "abc")
	r := &kgo.Record{}
	out := make([]*kgo.Record, 0, 1)
	b.ReportAllocs()
	for b.Loop() {
		r.Headers = in
		_, _ = tr.Process(context.Background(), record.Source{}, r, out[:0])
	}
}
