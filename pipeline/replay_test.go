package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/replay"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// TestReplayLineage: with Options.Replay, on a topic of dead letters
// (here the env's input, which is also the dead-letter topic), the chain
// sees each record as it was before it failed (no processor.error.*
// headers) with its original source; outputs' lineage names that
// source; a record that fails again is dead-lettered again naming it,
// with processor.error.replays one more, past the session's stop, which
// the replay never reads.
func TestReplayLineage(t *testing.T) {
	e := newLoopEnv(t)
	const n = 30
	var recs []*kgo.Record
	for i := range n {
		v := fmt.Sprintf("ok:%d", i)
		if i%3 == 0 {
			v = fmt.Sprintf("fail:%d", i)
		}
		hs := []kgo.RecordHeader{{Key: "trace", Value: []byte(v)}, {Key: record.HeaderError, Value: []byte("old")},
			{Key: record.HeaderErrorReplays, Value: []byte("4")}}
		hs = append(hs, record.LineageHeaders(record.Source{Topic: "orders", Partition: 2, Offset: int64(100 + i)})...)
		recs = append(recs, &kgo.Record{Topic: e.in, Key: []byte(v), Value: []byte(v), Headers: hs})
	}
	e.produceInputs(recs)
	stop := e.c.EndOffsets(t, e.in)
	var mu sync.Mutex
	seen := map[string]record.Source{}
	chain := chainOf(t, "loop", func(_ context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		mu.Lock()
		seen[string(r.Value)] = src
		mu.Unlock()
		for _, h := range r.Headers {
			if record.IsDeadLetterHeader(h.Key) || record.IsLineageHeader(h.Key) {
				return out, fmt.Errorf("the chain sees header %s", h.Key)
			}
		}
		if strings.HasPrefix(string(r.Value), "fail") {
			return out, errors.New("still failing")
		}
		return append(out, r), nil
	})
	chain.Frame([]transform.Stage{{Name: "replay", T: &replay.Restore{Filter: replay.All()}}}, nil)
	run := e.startWith("replay-lineage", "replay-lineage-1", chain, Options{Replay: true, Lineage: true, OnError: DeadLetter, DLQTopic: e.in},
		func(o *txn.Options) { o.StopAt = map[string]map[int32]int64{e.in: stop} })
	eventually(t, 30*time.Second, "the replay to commit its stops", run, func() bool {
		c := e.committedOffsets("replay-lineage")
		for p, s := range stop {
			if c[p] < s {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond) // time to read past the stop, were it not one
	run.stop(t, 10*time.Second)
	if c := e.committedOffsets("replay-lineage"); fmt.Sprint(c) != fmt.Sprint(stop) {
		t.Errorf("committed %v, want exactly the stops %v", c, stop)
	}
	for v, src := range seen {
		var i int
		fmt.Sscanf(v[strings.IndexByte(v, ':')+1:], "%d", &i)
		if want := (record.Source{Topic: "orders", Partition: 2, Offset: int64(100 + i)}); src != want {
			t.Errorf("the chain saw %s from %+v, want %+v", v, src, want)
		}
	}
	if len(seen) != n {
		t.Errorf("the chain saw %d records, want %d", len(seen), n)
	}
	outs := e.read(e.out, true)
	for _, o := range outs {
		src, ok := record.Lineage(o.Headers)
		if !ok || src.Topic != "orders" || fmt.Sprintf("ok:%d", src.Offset-100) != string(o.Value) {
			t.Errorf("output %q has lineage %+v", o.Value, src)
		}
	}
	if len(outs) != n-n/3 {
		t.Errorf("%d outputs, want %d", len(outs), n-n/3)
	}
	again := 0
	for _, d := range e.read(e.in, true) {
		if d.Offset < stop[d.Partition] {
			continue
		}
		again++
		src, _ := record.Lineage(d.Headers)
		if src.Topic != "orders" || string(d.Value) != fmt.Sprintf("fail:%d", src.Offset-100) ||
			headerValue(d, record.HeaderErrorReplays) != "5" || headerValue(d, record.HeaderError) == "old" {
			t.Errorf("dead letter again %q: lineage %+v, replays %q, error %q", d.Value, src, headerValue(d, record.HeaderErrorReplays), headerValue(d, record.HeaderError))
		}
	}
	if again != n/3 {
		t.Errorf("%d records dead-lettered again, want %d", again, n/3)
	}
}

// headerValue is r's last header key, or "".
func headerValue(r *kgo.Record, key string) string {
	v := ""
	for _, h := range r.Headers {
		if h.Key == key {
			v = string(h.Value)
		}
	}
	return v
}
