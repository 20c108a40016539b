package app

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// trySession is the session `processor try` runs the real loop on: a
// pipeline.Session and pipeline.Observer in memory, with no broker. It
// hands the loop the sample records one poll of one record each, in the
// order given, keeps the outputs and dead letters each input produced in
// its transaction, and keeps them only when the transaction commits; an
// abort rewinds to the first record not committed, as a rewind to the
// committed offsets does. Once every record has committed it calls done,
// which ends the loop. Every method but the Observer's runs on the loop's
// goroutine, as the loop promises.
type trySession struct {
	recs  []*kgo.Record         // the inputs, in order
	index map[record.Source]int // an input's place in recs
	m     *txn.Metrics
	done  func() // called once every input has committed
	// skipped reads processor_records_skipped_total: the loop counts a
	// skipped input after its commit, which tells it from a filtered one.
	skipped     func() float64
	seenSkipped float64
	// late reads processor_records_late_total, summed over the stores,
	// as skipped is read.
	late     func() float64
	seenLate float64
	last     int // the input committed last, -1 before any
	// topics are the topics that exist, nil: every one; an output to
	// another fails as it does on a cluster without it.
	topics   map[string]bool
	failures []txn.Failure

	next, committed int // the next input to poll; how many inputs have committed
	inTxn           bool
	begun           time.Time
	pending         []tryOutput // the open transaction's outputs and dead letters
	results         []tryResult // per input, once committed
}

// tryOutput is an output or a dead letter, copied when produced (the loop
// reuses the memory of a transaction's records once it has ended).
type tryOutput struct {
	input  int
	r      *kgo.Record
	dead   *txn.DeadLetter
	closed bool // emitted by a window the input's stream time closed
}

// tryResult is what the committed transaction of one input wrote.
type tryResult struct {
	committed bool
	outputs   []*kgo.Record
	dead      *txn.DeadLetter
	deadRec   *kgo.Record
	skipped   bool // no output, and the loop counted the input as skipped
	late      bool // a stateful stage found the input late
	// closed are the records of the windows (entries that emit on close)
	// the input's stream time closed, written in its transaction.
	closed []*kgo.Record
}

var (
	_ pipeline.Session  = (*trySession)(nil)
	_ pipeline.Observer = (*trySession)(nil)
)

// newTrySession returns a session over recs, whose topics, partitions and
// offsets must be set and unique.
func newTrySession(recs []*kgo.Record, m *txn.Metrics, done func()) *trySession {
	s := &trySession{recs: recs, index: map[record.Source]int{}, m: m, done: done, results: make([]tryResult, len(recs)),
		skipped: func() float64 { return 0 }, late: func() float64 { return 0 }, last: -1}
	for i, r := range recs {
		s.index[record.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}] = i
	}
	return s
}

func (s *trySession) Init(context.Context) error { return nil }

// Poll returns the next input, alone; with none left it calls done once
// every input has committed, and waits for ctx.
func (s *trySession) Poll(ctx context.Context, _ int) kgo.Fetches {
	s.settle()
	if s.next >= len(s.recs) {
		if s.committed == len(s.recs) && !s.inTxn && s.done != nil {
			s.done()
			s.done = nil
		}
		<-ctx.Done()
		return nil
	}
	r := cloneRecord(s.recs[s.next])
	s.next++
	fp := kgo.FetchPartition{Partition: r.Partition, HighWatermark: r.Offset + 1, LastStableOffset: r.Offset + 1,
		Records: []*kgo.Record{r}}
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: r.Topic, Partitions: []kgo.FetchPartition{fp}}}}}
}

func (s *trySession) Begin(context.Context) error {
	s.inTxn, s.begun = true, time.Now()
	return nil
}

func (s *trySession) InTxn() bool      { return s.inTxn }
func (s *trySession) Begun() time.Time { return s.begun }

func (s *trySession) Produce(_ context.Context, r *kgo.Record, src record.Source) {
	if s.topics != nil && !s.topics[r.Topic] {
		s.failures = append(s.failures, txn.Failure{Record: r, Err: kerr.UnknownTopicOrPartition})
		return
	}
	input, closed := s.inputOf(src)
	s.pending = append(s.pending, tryOutput{input: input, r: cloneRecord(r), closed: closed})
}

// inputOf is the input whose transaction produces a record of lineage
// src: that input, or for the records of a window that closed (whose
// lineage names an earlier input, already committed), the input being
// processed, with closed set.
func (s *trySession) inputOf(src record.Source) (input int, closed bool) {
	input, ok := s.index[src]
	if !ok || input < s.committed {
		return s.next - 1, true
	}
	return input, false
}

func (s *trySession) ProduceDeadLetter(ctx context.Context, r *kgo.Record, src record.Source, why txn.DeadLetter) {
	if s.topics != nil && !s.topics[r.Topic] {
		s.Produce(ctx, r, src)
		return
	}
	input, _ := s.inputOf(src)
	s.pending = append(s.pending, tryOutput{input: input, r: cloneRecord(r), dead: &why})
}

// TakeFailures returns the outputs to topics that do not exist since the
// last call; no topic has a size limit.
func (s *trySession) TakeFailures() []txn.Failure {
	f := s.failures
	s.failures = nil
	return f
}

// End keeps the open transaction's outputs, or drops them and rewinds on
// an abort.
func (s *trySession) End(_ context.Context, records int, abort txn.Reason) (bool, error) {
	s.inTxn = false
	pending := s.pending
	s.pending = nil
	if abort == "" && len(s.failures) > 0 {
		abort = txn.ReasonProduce
	}
	if abort != "" {
		s.next = s.committed
		s.m.Aborted.WithLabelValues(string(abort)).Inc()
		return false, nil
	}
	for i := s.committed; i < s.next; i++ {
		s.results[i] = tryResult{committed: true}
	}
	for _, o := range pending {
		res := &s.results[o.input]
		switch {
		case o.dead != nil:
			res.dead, res.deadRec = o.dead, o.r
		case o.closed:
			res.closed = append(res.closed, o.r)
		default:
			res.outputs = append(res.outputs, o.r)
		}
	}
	s.last = s.next - 1
	s.committed = s.next
	s.m.Committed.Inc()
	s.m.Records.Observe(float64(records))
	return true, nil
}

// settle marks the input committed last as skipped or late when the loop
// has counted a skipped or late record since the last call. Each
// transaction holds one input, and the loop counts it after End, before
// its next poll; call settle after Run too.
func (s *trySession) settle() {
	n, l := s.skipped(), s.late()
	if n > s.seenSkipped && s.last >= 0 {
		s.results[s.last].skipped = true
	}
	if l > s.seenLate && s.last >= 0 {
		s.results[s.last].late = true
	}
	s.seenSkipped, s.seenLate = n, l
}

func (s *trySession) MaxRecordBytes(string) int { return 0 }
func (s *trySession) MissingTopics(_ context.Context, topics []string) ([]string, error) {
	var missing []string
	for _, t := range topics {
		if s.topics != nil && !s.topics[t] {
			missing = append(missing, t)
		}
	}
	return missing, nil
}
func (s *trySession) AssignmentEpoch() uint64 { return 1 }
func (s *trySession) Close()                  {}

// The Observer: try serves no status page, so it says little.

func (s *trySession) Ready() bool           { return true }
func (s *trySession) Connecting() bool      { return false }
func (s *trySession) Metrics() *txn.Metrics { return s.m }
func (s *trySession) Assigned() map[string][]int32 {
	return map[string][]int32{}
}
func (s *trySession) CommittedOffsets() map[string]map[int32]int64 {
	return map[string]map[int32]int64{}
}
func (s *trySession) EndOffsets(context.Context, []string) (map[string]map[int32]txn.Ends, error) {
	return map[string]map[int32]txn.Ends{}, nil
}
func (s *trySession) Identity() (string, string)               { return "try", "try" }
func (s *trySession) Member() (string, int32)                  { return "try", 1 }
func (s *trySession) Guarantee() string                        { return "exactly_once" }
func (s *trySession) Sink() string                             { return "kafka" }
func (s *trySession) CommitFailing() (time.Time, bool, string) { return time.Time{}, false, "" }

// cloneRecord copies what a broker would keep of r.
func cloneRecord(r *kgo.Record) *kgo.Record {
	c := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)})
	}
	return c
}
