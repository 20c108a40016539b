package pipelinetest

import (
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// Result is what the transaction of one input committed.
type Result struct {
	// Input is the record as stored in its topic: with its topic,
	// partition, offset and timestamp.
	Input *kgo.Record
	// Committed is false when the loop stopped before the input's
	// transaction committed (Send's error says why); the rest is then
	// empty.
	Committed bool
	// Outputs are the records the chain made of the input, as written.
	Outputs []*kgo.Record
	// DeadLetter is why the input was dead-lettered, and
	// DeadLetterRecord what went to the dead-letter topic; nil when it
	// was not.
	DeadLetter       *txn.DeadLetter
	DeadLetterRecord *kgo.Record
	// Skipped: the input failed and was dropped under the skip policy.
	Skipped bool
	// Late: a stateful stage found the input late (its window had
	// closed).
	Late bool
	// Closed are the records of the windows (entries that emit on
	// close) that the input's stream time closed, written in its
	// transaction.
	Closed []*kgo.Record
}

// Filtered reports whether the input committed with no output, dead
// letter or skip, and was not late: the chain dropped it.
func (r Result) Filtered() bool {
	return r.Committed && len(r.Outputs) == 0 && r.DeadLetter == nil && !r.Skipped && !r.Late
}

// Send runs recs through the loop, each in a transaction of its own, in
// the order given, and returns one Result per record. A record's empty
// topic is the first input topic; it goes to the partition it names, at
// its offset or at the partition's end when that is further; a zero
// timestamp is now. The records are not changed. When the loop stops
// (PROCESSOR_ON_ERROR=fail and a record failed, or a required topic is
// missing), Send returns the error Run stopped with, and the records from
// the one that failed on are not committed.
func (d *Driver) Send(recs ...*kgo.Record) ([]Result, error) {
	res := make([]Result, len(recs))
	for i, r := range recs {
		in := memkafka.Clone(r)
		if in.Topic == "" {
			in.Topic = d.inputs[0]
		}
		res[i].Input = in
		if err := d.stopped(); err != nil {
			return res, err
		}
		if !slices.Contains(d.inputs, in.Topic) {
			return res, fmt.Errorf("pipelinetest: %q is not an input topic (declare inputs with WithInput)", in.Topic)
		}
		skipped, late := counter(d.m.Skipped), sum(d.m.Late)
		if err := d.c.Append(in); err != nil {
			return res, fmt.Errorf("pipelinetest: %w (declare inputs with WithInput)", err)
		}
		if !d.settle(in) {
			return res, d.stopped()
		}
		res[i].Committed = true
		res[i].Skipped = counter(d.m.Skipped) > skipped
		res[i].Late = sum(d.m.Late) > late
		src := transform.Source{Topic: in.Topic, Partition: in.Partition, Offset: in.Offset}
		for _, o := range d.s.TakeCommitted() {
			switch {
			case o.Source != src:
				res[i].Closed = append(res[i].Closed, o.Record)
			case o.DeadLetter != nil:
				res[i].DeadLetter, res[i].DeadLetterRecord = o.DeadLetter, o.Record
			default:
				res[i].Outputs = append(res[i].Outputs, o.Record)
			}
		}
	}
	return res, nil
}

// stopped is the error Run stopped with, or nil while it runs. A run
// that stopped with no error stopped because Close was called.
func (d *Driver) stopped() error {
	select {
	case <-d.done:
		if d.err == nil {
			return fmt.Errorf("pipelinetest: the driver is closed")
		}
		return d.err
	default:
		return nil
	}
}

// settle waits until in's transaction has committed and the loop waits
// for the next record, so that what it counts after a commit is counted;
// false when Run returned first.
func (d *Driver) settle(in *kgo.Record) bool {
	for {
		changed := d.c.Changed()
		if d.c.Committed(Group, in.Topic)[in.Partition] > in.Offset && d.s.Waiting() {
			return true
		}
		select {
		case <-changed:
		case <-d.done:
			return false
		}
	}
}

// counter reads c.
func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// sum is the sum of v's counters.
func sum(v *prometheus.CounterVec) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { v.Collect(ch); close(ch) }()
	var total float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			total += d.GetCounter().GetValue()
		}
	}
	return total
}
