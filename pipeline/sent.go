package pipeline

import (
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// sentLog is what the open transaction keeps of each output it handed to
// the session: enough to tell, when producing one fails for good, which
// input it came from (and, for a dead letter, why that input failed), but
// not the output itself. Holding the outputs until the transaction ends
// would keep every one of them alive (and the fetched batches their keys
// and values point into) long after the client is done with them: at
// 100,000 records a transaction, most of the processor's memory.
//
// An entry is 24 bytes without pointers, so the garbage collector never
// scans the log. It names its output by the record's address, which does
// not keep the record alive: Go's collector does not move heap objects,
// and a record is alive from the moment it is handed to the session until
// its produce has succeeded or failed; a failed one stays alive in the
// txn.Failure that reports it. Another record may come to have the same
// address only after an earlier one was freed, that is after the earlier
// one's produce succeeded, so the last entry noted at a failed record's
// address is that record's.
type sentLog struct {
	entries []sent
	dead    []deadSent // the dead letters among entries, in entries' order

	topics    []string          // input topics, by index; kept across transactions
	topicIdx  map[string]uint32 // their indexes
	lastTopic string            // the topic of the last entry, and its index:
	lastIdx   uint32            // a poll's records come in runs of one topic
}

// sent is one output handed to the session: its address and its input.
type sent struct {
	at     uintptr // the output record's address; never turned back into a pointer
	offset int64
	part   int32
	topic  uint32 // index in sentLog.topics, with deadFlag set on a dead letter
}

// deadFlag marks the entry of a dead letter in sent.topic.
const deadFlag = 1 << 31

// deadSent is why the input of a dead letter, entries[i], failed.
type deadSent struct {
	i   int
	why failure
}

func newSentLog() sentLog { return sentLog{topicIdx: make(map[string]uint32)} }

// addr is r's address, as an identity that does not keep r alive.
func addr(r *kgo.Record) uintptr { return uintptr(unsafe.Pointer(r)) }

// note records that r, an output of src, was handed to the session.
func (l *sentLog) note(r *kgo.Record, src record.Source) {
	l.entries = append(l.entries, sent{at: addr(r), offset: src.Offset, part: src.Partition, topic: l.topicIndex(src.Topic)})
}

// noteDead records that r, the dead letter of src, which failed with
// why, was handed to the session.
func (l *sentLog) noteDead(r *kgo.Record, src record.Source, why failure) {
	l.dead = append(l.dead, deadSent{i: len(l.entries), why: why})
	l.entries = append(l.entries, sent{at: addr(r), offset: src.Offset, part: src.Partition, topic: l.topicIndex(src.Topic) | deadFlag})
}

// topicIndex interns an input topic. Comparing with the last one is
// cheap: the records of one poll's partition share their topic's string.
func (l *sentLog) topicIndex(t string) uint32 {
	if t == l.lastTopic && len(l.topics) > 0 {
		return l.lastIdx
	}
	i, ok := l.topicIdx[t]
	if !ok {
		i = uint32(len(l.topics))
		l.topics = append(l.topics, t)
		l.topicIdx[t] = i
	}
	l.lastTopic, l.lastIdx = t, i
	return i
}

// inflight is an output found in the log: its input, and on a dead
// letter why that input failed.
type inflight struct {
	src  record.Source
	dead *failure
}

// finder returns the lookup of failed outputs in the log: built once, on
// the first failure to look up, as failures are rare.
func (l *sentLog) finder() func(r *kgo.Record) (inflight, bool) {
	var at map[uintptr]int
	return func(r *kgo.Record) (inflight, bool) {
		if at == nil {
			at = make(map[uintptr]int, len(l.entries))
			for i, e := range l.entries {
				at[e.at] = i // the last entry at an address wins
			}
		}
		i, ok := at[addr(r)]
		if !ok {
			return inflight{}, false
		}
		return l.entry(i), true
	}
}

// entry decodes entries[i].
func (l *sentLog) entry(i int) inflight {
	e := l.entries[i]
	in := inflight{src: record.Source{Topic: l.topics[e.topic&^deadFlag], Partition: e.part, Offset: e.offset}}
	if e.topic&deadFlag != 0 {
		for j := range l.dead {
			if l.dead[j].i == i {
				in.dead = &l.dead[j].why
				break
			}
		}
	}
	return in
}

// reset forgets the ended transaction's outputs.
func (l *sentLog) reset() {
	l.entries = l.entries[:0]
	clear(l.dead)
	l.dead = l.dead[:0]
}
