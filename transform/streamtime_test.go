package transform

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clockStores is a Stores that gives a stream time and takes late
// records, as the processor's does.
type clockStores struct {
	ms   int64
	late int
}

func (*clockStores) Store(string) (Store, error) { return nil, ErrNoStores }
func (s *clockStores) StreamTime() (int64, bool) { return s.ms, s.ms >= 0 }
func (s *clockStores) Late(rec *kgo.Record, _ LateInfo) bool {
	s.late++
	rec.Topic = "late"
	return true
}

// StreamTimeOf reads the processor's stream time through the context, in
// time and in milliseconds alike, allocating nothing; without it, or
// with none known, it says so.
func TestStreamTimeOf(t *testing.T) {
	s := &clockStores{ms: 1733450000123}
	ctx, cancel := context.WithCancel(WithStores(context.Background(), s))
	defer cancel()
	if tm, ok := StreamTimeOf(ctx); !ok || !tm.Equal(time.UnixMilli(1733450000123)) {
		t.Errorf("StreamTimeOf = %v, %t", tm, ok)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = StreamTimeOf(ctx) }); n != 0 {
		t.Errorf("StreamTimeOf allocates %v times a call", n)
	}
	s.ms = -1
	if _, ok := StreamMillisOf(ctx); ok {
		t.Error("an unknown stream time reads as known")
	}
	if _, ok := StreamTimeOf(context.Background()); ok {
		t.Error("a context without the processor's stores has a stream time")
	}
	rec := &kgo.Record{}
	if !Late(ctx, rec, LateInfo{Store: "s"}) || rec.Topic != "late" || s.late != 1 {
		t.Errorf("Late did not reach the processor's handler: topic %q, %d noted", rec.Topic, s.late)
	}
	if Late(context.Background(), &kgo.Record{}, LateInfo{}) {
		t.Error("Late outside the processor routed a record")
	}
}
