package aggregate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/memstore"
)

// With EMIT=close a record emits nothing; each window's entry, closed,
// gives one output: the key and value of EMIT=update's last output for
// that window, stamped with the window's last millisecond, and the offset
// of the last input counted into it. By record key (any bytes) and by a
// BY value, string or not, tumbling and hopping.
func TestCloseEmitsTheLastUpdate(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		s    Settings
	}{
		{"record key", Settings{Function: "count", Window: time.Minute}},
		{"BY string", Settings{Function: "sum", Field: ".n", By: ".c", Window: time.Minute}},
		{"BY number, hopping", Settings{Function: "max", Field: ".n", By: ".n % 3", Window: time.Minute, Advance: 20 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []*kgo.Record
			for i := range 40 {
				recs = append(recs, &kgo.Record{Key: []byte{'k', byte(i % 3), 0xff}, Value: fmt.Appendf(nil, `{"c":"c%d","n":%d}`, i%2, i),
					Timestamp: base.Add(time.Duration(i*7) * time.Second)})
			}
			upd := tc.s
			upd.Store, upd.Emit = "aggregate", "update"
			last := map[string]string{} // output key: the last update's value
			lastOff := map[string]int64{}
			tu, err := New(&upd)
			if err != nil {
				t.Fatal(err)
			}
			ctx := transform.WithStores(context.Background(), memstore.Stores{})
			for i, r := range recs {
				out, err := tu.Process(ctx, record.Source{Offset: int64(i)}, &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range out {
					last[string(o.Key)], lastOff[string(o.Key)] = string(o.Value), int64(i)
				}
			}
			cl := tc.s
			cl.Store, cl.Emit = "aggregate", "close"
			tc2, err := New(&cl)
			if err != nil {
				t.Fatal(err)
			}
			st := memstore.Stores{}
			ctx = transform.WithStores(context.Background(), st)
			for i, r := range recs {
				out, err := tc2.Process(ctx, record.Source{Topic: "in", Partition: 2, Offset: int64(i)}, r, nil)
				if err != nil || len(out) != 0 {
					t.Fatalf("EMIT=close: %d outputs, %v; want none", len(out), err)
				}
			}
			w := tc2.(transform.WindowEmitter)
			if !w.EmitsOnClose("aggregate") {
				t.Fatal("EMIT=close does not emit on close")
			}
			got := map[string]string{}
			for k, v := range st["aggregate"] {
				out, from, err := w.Closed(context.Background(), transform.Closing{Store: "aggregate", Topic: "in", Partition: 2, Key: []byte(k), Value: v}, nil)
				if err != nil || len(out) != 1 {
					t.Fatalf("Closed(%q): %d outputs, %v", k, len(out), err)
				}
				o := out[0]
				got[string(o.Key)] = string(o.Value)
				if want := (record.Source{Topic: "in", Partition: 2, Offset: lastOff[string(o.Key)]}); from != want {
					t.Errorf("%s: lineage %v, want %v", o.Key, from, want)
				}
				if _, ok := last[string(o.Key)]; ok && !o.Timestamp.Before(base.Add(time.Hour)) {
					t.Errorf("%s: stamped %v", o.Key, o.Timestamp)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(last) {
				t.Fatalf("final outputs\n%v\nwant the last updates\n%v", got, last)
			}
			if len(got) < 2 {
				t.Fatalf("only %d windows", len(got))
			}
		})
	}
}

// originStores are memstore.Stores that name an original input
// (transform.Originer), as the processor does behind a repartition hop.
type originStores struct {
	memstore.Stores
	origin record.Source
}

func (s *originStores) Origin() (record.Source, bool) { return s.origin, true }

// Behind a repartition hop the window keeps the original input the
// processor names (transform.OriginOf), not the repartition record's
// source, and its final row names it; an entry of the earlier form,
// with only an offset, names the input of the entry's own topic and
// partition; one with no input names none; a damaged one fails.
func TestCloseKeepsTheOrigin(t *testing.T) {
	s := Settings{Function: "count", Window: time.Minute, Store: "aggregate", Emit: "close", By: ".c"}
	tr, err := New(&s)
	if err != nil {
		t.Fatal(err)
	}
	st := &originStores{Stores: memstore.Stores{}}
	ctx := transform.WithStores(context.Background(), st)
	for i, c := range []string{"a", "a", "b"} {
		st.origin = record.Source{Topic: "orders", Partition: int32(i), Offset: int64(100 + i)}
		rec := &kgo.Record{Value: fmt.Appendf(nil, `{"c":%q}`, c), Timestamp: time.UnixMilli(1000)}
		if _, err := tr.Process(ctx, record.Source{Topic: "g-aggregate-repartition", Partition: 3, Offset: int64(i)}, rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	w := tr.(transform.WindowEmitter)
	got := map[string]string{}
	for k, v := range st.Stores["aggregate"] {
		out, from, err := w.Closed(ctx, transform.Closing{Store: "aggregate", Topic: "g-aggregate-repartition", Partition: 3, Key: []byte(k), Value: v}, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("Closed: %d outputs, %v", len(out), err)
		}
		got[string(out[0].Key)] = fmt.Sprintf("%s %s/%d/%d", out[0].Value, from.Topic, from.Partition, from.Offset)
	}
	want := map[string]string{
		"a@0": `{"key":"a","value":2,"window_start":"1970-01-01T00:00:00Z","window_end":"1970-01-01T00:01:00Z"} orders/1/101`,
		"b@0": `{"key":"b","value":1,"window_start":"1970-01-01T00:00:00Z","window_end":"1970-01-01T00:01:00Z"} orders/2/102`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("final rows\n%v\nwant\n%v", got, want)
	}
	key := []byte(nil)
	for k := range st.Stores["aggregate"] {
		key = []byte(k)
		break
	}
	for _, c := range []struct {
		value, want string
		fails       bool
	}{
		{"7 42", "in/4/42", false},
		{"7", "in/4/-1", false},
		{"7 42 1 other", "other/1/42", false},
		{"7 x", "", true},
		{"7 42 1", "", true},
		{"7 42 y other", "", true},
	} {
		_, from, err := w.Closed(ctx, transform.Closing{Store: "aggregate", Topic: "in", Partition: 4, Key: key, Value: []byte(c.value)}, nil)
		if l := fmt.Sprintf("%s/%d/%d", from.Topic, from.Partition, from.Offset); (err != nil) != c.fails || (!c.fails && l != c.want) {
			t.Errorf("entry %q: lineage %v, error %v; want %q (fails %v)", c.value, from, err, c.want, c.fails)
		}
	}
}

// EMIT is update or close, and close needs a WINDOW.
func TestEmitSetting(t *testing.T) {
	for _, s := range []Settings{{Function: "count", Emit: "close", Store: "a"}, {Function: "count", Emit: "final", Window: time.Minute, Store: "a"}} {
		if _, err := New(&s); err == nil {
			t.Errorf("EMIT=%s WINDOW=%s accepted", s.Emit, s.Window)
		}
	}
}
