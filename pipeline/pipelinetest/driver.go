// Package pipelinetest drives a transform chain through the processor's
// real loop (pipeline.New and Run) with no broker: a session and state
// stores in memory stand for the cluster, so that the error policy,
// retries, timeouts, limits, stream time and window closes apply as they
// do in the processor, in milliseconds. `processor try` and `processor
// test` run on it, and a Go plugin's author tests a transform with it as
// Kafka Streams users test a topology with TopologyTestDriver:
//
//	d, err := pipelinetest.New(chain)
//	...
//	defer d.Close()
//	res, err := d.Send(&kgo.Record{Key: []byte("k"), Value: []byte(`{"n":1}`)})
//
// Each record sent runs in a transaction of its own, in the order sent,
// and Send returns what that transaction committed for it: its outputs,
// or its dead letter, or that it was skipped or filtered, and the records
// of the windows its stream time closed.
package pipelinetest

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// The names the driver uses unless told otherwise.
const (
	// DefaultInput is the input topic when neither WithInput nor
	// Options.InputTopics names one.
	DefaultInput = "input"
	// DefaultOutput is the output topic when Options.OutputTopic is
	// empty.
	DefaultOutput = "output"
	// Group is the consumer group the loop runs as.
	Group = "pipelinetest"
)

// settings are what the Options set.
type settings struct {
	opts   pipeline.Options
	inputs map[string]int // topic -> partitions
	topics []string       // nil: every topic exists
}

// Option changes how New builds the driver.
type Option func(*settings)

// WithOptions starts the loop from o rather than from the defaults (an
// output topic "output", lineage headers, the fail policy). Whatever o
// says, each input runs in a transaction of its own; OutputTopic,
// Metrics, State (for a chain with stores) and InputTopics are filled in
// when unset.
func WithOptions(o pipeline.Options) Option {
	return func(s *settings) { s.opts = o }
}

// WithInput declares an input topic of partitions partitions (at least
// one); without any, the inputs are Options.InputTopics, or "input", of
// one partition each.
func WithInput(topic string, partitions int) Option {
	return func(s *settings) {
		if s.inputs == nil {
			s.inputs = map[string]int{}
		}
		s.inputs[topic] = max(partitions, 1)
	}
}

// WithTopics says which topics exist besides the inputs: an output to
// another fails as it does on a cluster without it, and the loop refuses
// to start when a topic it requires (Options.RequireTopics) is not
// among them. Without it every topic exists.
func WithTopics(topics ...string) Option {
	return func(s *settings) { s.topics = slices.Clone(topics) }
}

// Driver is a chain running in the real loop on a cluster in memory.
// Its methods are for one goroutine.
type Driver struct {
	c      *memkafka.Cluster
	s      *memkafka.Session
	p      *pipeline.Pipeline
	m      *pipeline.Metrics
	inputs []string
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // what Run returned, once done
}

// New builds the loop over chain and starts it; its error is the loop's
// refusal to build (pipeline.New's), e.g. a budget too small for the
// chain's timeouts. The caller closes the chain after Close.
func New(chain *transform.Chain, opts ...Option) (*Driver, error) {
	st := settings{opts: pipeline.Options{OutputTopic: DefaultOutput, Lineage: true}}
	for _, o := range opts {
		o(&st)
	}
	o := st.opts
	o.MaxRecordsPerTxn = 1
	if o.OutputTopic == "" {
		o.OutputTopic = DefaultOutput
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg := prometheus.NewRegistry()
	if o.Metrics == nil {
		o.Metrics = pipeline.NewMetrics(reg)
	}
	if o.State == nil && len(chain.Stores()) > 0 {
		o.State = newState()
	}
	if st.inputs == nil {
		st.inputs = map[string]int{}
		for _, t := range o.InputTopics {
			st.inputs[t] = 1
		}
		if len(st.inputs) == 0 {
			st.inputs[DefaultInput] = 1
		}
	}
	d := &Driver{c: memkafka.NewCluster(nil), m: o.Metrics, done: make(chan struct{})}
	for t, n := range st.inputs {
		d.inputs = append(d.inputs, t)
		d.c.Create(t, n, 0)
	}
	slices.Sort(d.inputs)
	if len(o.InputTopics) == 0 {
		o.InputTopics = d.inputs
	}
	if st.topics == nil {
		d.c.AutoCreate()
	}
	for _, t := range st.topics {
		if !d.c.Has(t) {
			d.c.Create(t, 1, 0)
		}
	}
	d.s = memkafka.NewSession(d.c, Group, Group, d.inputs, txn.NewMetrics(reg))
	d.s.KeepCommitted()
	p, err := pipeline.New(chain, o)
	if err != nil {
		return nil, err
	}
	d.p = p
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() {
		defer close(d.done)
		d.err = p.Run(ctx, d.s, d.s)
	}()
	return d, nil
}

// Close stops the loop and returns what Run returned: nil after a clean
// stop, or the error it stopped with before.
func (d *Driver) Close() error {
	d.cancel()
	<-d.done
	return d.err
}

// Status is the loop's status snapshot (what /status serves).
func (d *Driver) Status() pipeline.Status { return d.p.Status() }

// Read returns the committed records of topic, partition after
// partition: what a read_committed consumer reads.
func (d *Driver) Read(topic string) []*kgo.Record { return d.c.Read(topic, true) }
