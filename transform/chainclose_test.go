package transform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/aggregate"
	_ "github.com/streamproc/processor/transform/dedupe"
	_ "github.com/streamproc/processor/transform/jq"
)

// A closed window's final row runs through the stages after the
// aggregate that emits it; a stage that keeps state after it is refused.
func TestChainClosed(t *testing.T) {
	lookup := func(e transform.Entry, s string) (string, bool) {
		switch {
		case e.Name == "aggregate" && s == "WINDOW":
			return "1m", true
		case e.Name == "aggregate" && s == "EMIT":
			return "close", true
		case e.Name == "jq" && s == "EXPR":
			return ".value", true
		}
		return "", false
	}
	c, err := transform.Default.Build([]transform.Entry{{Name: "aggregate"}, {Name: "jq"}}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, at, ok := c.Emitter("aggregate"); !ok || at != 0 {
		t.Fatalf("Emitter: %d, %v", at, ok)
	}
	key := append([]byte{0x01, 'k'}, 0, 0, 0, 0, 0, 0, 0xea, 0x60) // record key k, window at 60000 ms
	out, from, err := c.Closed(context.Background(), transform.Closing{Store: "aggregate", Topic: "in", Partition: 1, Key: key, Value: []byte("7 42")}, nil)
	if err != nil || len(out) != 1 || string(out[0].Value) != "7" || from != (record.Source{Topic: "in", Partition: 1, Offset: 42}) {
		t.Fatalf("Closed: %d outputs, lineage %v, %v", len(out), from, err)
	}
	out, from, err = c.Closed(context.Background(), transform.Closing{Store: "aggregate", Topic: "hop", Partition: 1, Key: key, Value: []byte("7 42 3 orders")}, nil)
	if err != nil || len(out) != 1 || from != (record.Source{Topic: "orders", Partition: 3, Offset: 42}) {
		t.Fatalf("Closed behind a hop: %d outputs, lineage %v, %v", len(out), from, err)
	}
	if string(out[0].Key) != "k@60000" || out[0].Timestamp.UnixMilli() != 119999 {
		t.Fatalf("Closed: key %s, stamped %d", out[0].Key, out[0].Timestamp.UnixMilli())
	}
	_, err = transform.Default.Build([]transform.Entry{{Name: "aggregate"}, {Name: "dedupe"}}, lookup)
	if err == nil || !strings.Contains(err.Error(), "EMIT=close") {
		t.Fatalf("a stateful stage after EMIT=close: %v", err)
	}
}
