package aggregate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
				out, err := tu.Process(ctx, transform.Source{Offset: int64(i)}, &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}, nil)
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
				out, err := tc2.Process(ctx, transform.Source{Offset: int64(i)}, r, nil)
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
				out, off, err := w.Closed(context.Background(), transform.Closing{Store: "aggregate", Key: []byte(k), Value: v}, nil)
				if err != nil || len(out) != 1 {
					t.Fatalf("Closed(%q): %d outputs, %v", k, len(out), err)
				}
				o := out[0]
				got[string(o.Key)] = string(o.Value)
				if off != lastOff[string(o.Key)] {
					t.Errorf("%s: lineage offset %d, want %d", o.Key, off, lastOff[string(o.Key)])
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

// EMIT is update or close, and close needs a WINDOW.
func TestEmitSetting(t *testing.T) {
	for _, s := range []Settings{{Function: "count", Emit: "close", Store: "a"}, {Function: "count", Emit: "final", Window: time.Minute, Store: "a"}} {
		if _, err := New(&s); err == nil {
			t.Errorf("EMIT=%s WINDOW=%s accepted", s.Emit, s.Window)
		}
	}
}
