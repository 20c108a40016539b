package pipeline

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// The log finds each failed output's input by the record's address, a dead
// letter's with why its input failed, and nothing for a record it was not
// handed.
func TestSentLogFindsInputs(t *testing.T) {
	l := newSentLog()
	recs := make([]*kgo.Record, 6)
	srcs := make([]record.Source, len(recs))
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte{byte(i)}}
		srcs[i] = record.Source{Topic: []string{"a", "b"}[i%2], Partition: int32(i), Offset: int64(100 + i)}
	}
	why := failure{stage: "t", attempts: 3, err: errors.New("bad")}
	for i, r := range recs {
		if i == 4 {
			l.noteDead(r, srcs[i], why)
			continue
		}
		l.note(r, srcs[i])
	}
	find := l.finder()
	for i, r := range recs {
		in, ok := find(r)
		if !ok || in.src != srcs[i] {
			t.Errorf("record %d: found %+v, %v; want %+v", i, in.src, ok, srcs[i])
		}
		switch {
		case i == 4 && (in.dead == nil || *in.dead != why):
			t.Errorf("dead letter %d: failure %+v, want %+v", i, in.dead, why)
		case i != 4 && in.dead != nil:
			t.Errorf("output %d: failure %+v, want none", i, in.dead)
		}
	}
	if in, ok := find(&kgo.Record{}); ok {
		t.Errorf("a record never noted: found %+v", in)
	}
	l.reset()
	if in, ok := l.finder()(recs[0]); ok {
		t.Errorf("after reset: found %+v", in)
	}
}

// An address noted twice belongs to the later record: the earlier one was
// freed (its produce succeeded) before the later one could be allocated
// there, and a failed record stays alive until the transaction ends.
func TestSentLogLastEntryAtAnAddressWins(t *testing.T) {
	l := newSentLog()
	r := &kgo.Record{}
	first := record.Source{Topic: "in", Partition: 0, Offset: 1}
	second := record.Source{Topic: "in", Partition: 3, Offset: 9}
	l.note(r, first)
	l.note(&kgo.Record{}, record.Source{Topic: "other", Offset: 5})
	l.note(r, second)
	if in, ok := l.finder()(r); !ok || in.src != second {
		t.Errorf("found %+v, %v; want %+v", in.src, ok, second)
	}
}

// A log entry holds no pointer: the log does not keep outputs alive, and
// the collector does not scan it.
func TestSentLogEntryIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(sent{}); n > 24 {
		t.Errorf("an entry takes %d bytes, want at most 24", n)
	}
}
