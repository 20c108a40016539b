package dedupe

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform/internal/memstore"
)

func TestFiltersDuplicatesWithinTheWindow(t *testing.T) {
	tr, err := New(&Settings{By: ".id", Window: time.Hour, Store: "dedupe"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := memstore.Stores{}.Context(context.Background())
	base := time.Unix(100000, 0)
	cases := []struct {
		value string
		at    time.Duration
		pass  bool
	}{
		{`{"id":1}`, 0, true},
		{`{"id":2}`, time.Minute, true},
		{`{"id":1}`, 59 * time.Minute, false},
		{`{"id":1}`, time.Hour, true}, // the window from its first sighting is over
		{`{"id":1}`, time.Hour + time.Minute, false},
		{`{"id":"1"}`, time.Hour + time.Minute, true}, // a string is another id
	}
	for i, c := range cases {
		out, err := tr.Process(ctx, record.Source{}, &kgo.Record{Value: []byte(c.value), Timestamp: base.Add(c.at)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(out) == 1; got != c.pass {
			t.Errorf("record %d (%s at +%s): passed %v, want %v", i, c.value, c.at, got, c.pass)
		}
	}
}

func TestRefusesBadSettings(t *testing.T) {
	if _, err := New(&Settings{Window: 0, Store: "d"}); err == nil {
		t.Error("accepted a zero window")
	}
	if _, err := New(&Settings{Window: time.Hour, By: "]", Store: "d"}); err == nil {
		t.Error("accepted a bad BY")
	}
}
