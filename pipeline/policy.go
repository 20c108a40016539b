package pipeline

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// OnError is what happens to an input record that fails for good: its
// transform failed permanently (after retries), panicked, or its output
// can never be produced.
type OnError string

// Error policies (Options.OnError).
const (
	// Fail aborts the transaction and stops the processor; nothing from
	// the bad record on is committed, and a restart meets it again.
	Fail OnError = "fail"
	// DeadLetter writes the record, with its error, to the dead-letter
	// topic in the same transaction as the other outputs and the offsets.
	DeadLetter OnError = "dlq"
	// Skip drops the record, counts and logs it: at-most-once for that
	// record, by choice.
	Skip OnError = "skip"
)

// failure is why an input record failed for good.
type failure struct {
	stage    string // the chain entry that failed, or stageProduce
	attempts int
	err      error
}

// poison is an input record that failed for good in an aborted attempt
// (its output could not be produced, its dead letter could not be written,
// or it alone used up the transaction's budget), so that its next attempt
// goes where the policy says.
type poison struct {
	failure
	dlqFailed bool // its dead letter could not be written either
}

// poisonBook is what aborted attempts learnt: inputs that failed for good
// (their next attempt goes where the policy says), and destination topics
// the cluster confirmed missing (records routed there fail at once).
type poisonBook struct {
	poison  map[record.Source]poison
	missing map[string]time.Time // and when it was confirmed
	// alone is the input last found alone in a transaction that ran out
	// of its budget (with aloneSet), until a transaction commits: found so
	// twice in a row, it is blamed (process.go).
	alone    record.Source
	aloneSet bool
}

// blame makes the records a transaction blamed poison: the abort that
// follows retries without running them.
func (b *poisonBook) blame(blamed []blamed) {
	for _, x := range blamed {
		b.poison[x.src] = poison{failure: x.failure}
	}
}

// forget drops the entries a committed transaction applied: they are
// handled. A rebalance may hand leftovers to another instance, which
// finds them itself.
func (b *poisonBook) forget(applied []record.Source) {
	for _, src := range applied {
		delete(b.poison, src)
	}
}

// failed applies the error policy to an input record that failed for good:
// its chain entry stage failed after attempts runs, or (stage "produce") its
// output could not be produced. dropValue, when set, says why its dead
// letter goes without the value. Only Fail returns an error.
func (p *Pipeline) failed(src record.Source, r *kgo.Record, stage string, attempts int, err error, dropValue string) error {
	switch p.o.OnError {
	case DeadLetter:
		p.deadLetter(src, r, stage, attempts, err, dropValue)
		return nil
	case Skip:
		p.open.counts.skipped++
		p.log.Warn("skipping a record that failed ("+p.names.onError+"=skip): it will not be processed again",
			"topic", src.Topic, "partition", src.Partition, "offset", src.Offset, "transform", stage, "attempts", attempts, "err", err.Error())
		return nil
	}
	return &RecordError{Source: src, Err: err}
}

// RecordError is the fatal error of a record the chain failed on: the
// transaction holding it was aborted, nothing from it on was committed, and
// a restart meets the same record again.
type RecordError struct {
	Source record.Source
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("record topic %s partition %d offset %d: %v", e.Source.Topic, e.Source.Partition, e.Source.Offset, e.Err)
}

// Unwrap returns the transform error.
func (e *RecordError) Unwrap() error { return e.Err }
