package codec

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/streamproc/processor/schema"
)

// missingTTL is how long a topic whose subject has no usable schema fails
// its records without asking the registry again: a schema registered
// meanwhile is used within it.
const missingTTL = 30 * time.Second

// EncodersOptions configure NewEncoders.
type EncodersOptions struct {
	Registry schema.Registry
	Format   schema.Format
	// Suffix makes a topic's subject, the topic name strategy:
	// "-key" or "-value".
	Suffix string
	// Message is the Protobuf message outputs are (default: the schema's
	// first).
	Message string
	// DefaultTopic is the topic of outputs that no transform routed.
	DefaultTopic string
	// Subject is DefaultTopic's subject; empty: DefaultTopic + Suffix.
	Subject string
	// Schema, when set, is registered under Subject at Start and encodes
	// every output to DefaultTopic; the registry refusing it fails Start.
	// Unset, the subject's latest version does, refreshed by Refresh.
	Schema *schema.Schema
	// SubjectSetting and SchemaSetting name the settings of Subject and
	// Schema in errors, e.g. PROCESSOR_OUTPUT_VALUE_SUBJECT.
	SubjectSetting, SchemaSetting string
	// Timeout bounds fetching a topic's schema when it has none yet (the
	// first output to a routed topic, say) as a whole; 0 means no bound
	// but the client's per request (schema.DecoderOptions.Timeout).
	Timeout time.Duration
}

// Encoders hands out the encoder of each output topic: the latest schema
// of the topic's subject, fetched once and refreshed, so that no record
// costs a registry call. It is safe for concurrent use.
type Encoders struct {
	o      EncodersOptions
	mu     sync.RWMutex
	topics map[string]*topicEncoder
}

// topicEncoder is one topic's encoder, or why it has none (until retry).
type topicEncoder struct {
	enc   *schema.Encoder
	err   error
	retry time.Time // with err: when to ask the registry again
	fixed bool      // the schema file's: never refreshed
}

// NewEncoders returns the encoders of o; Start readies them.
func NewEncoders(o EncodersOptions) *Encoders {
	if o.Subject == "" {
		o.Subject = o.DefaultTopic + o.Suffix
	}
	return &Encoders{o: o, topics: map[string]*topicEncoder{}}
}

// Start registers the configured schema, or fetches the latest schema of
// the default topic's subject and of each of topics' (fixed destinations
// of routing). A *schema.Error of FaultSchema is a configuration mistake
// (a schema that does not compile, a subject without versions, a schema
// the registry refuses as incompatible); FaultRegistry is worth retrying.
func (e *Encoders) Start(ctx context.Context, topics []string) error {
	if e.o.Schema != nil {
		s, err := e.o.Registry.Register(ctx, e.o.Subject, *e.o.Schema)
		if err != nil {
			return fmt.Errorf("registering %s under subject %q (%s): %w", e.o.SchemaSetting, e.o.Subject, e.o.SubjectSetting, err)
		}
		enc, err := e.newEncoder(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: %w", e.o.SchemaSetting, err)
		}
		e.store(e.o.DefaultTopic, &topicEncoder{enc: enc, fixed: true})
	}
	for _, t := range append([]string{e.o.DefaultTopic}, topics...) {
		if _, err := e.lookup(ctx, t, true); err != nil {
			if schema.FaultOf(err) != schema.FaultSchema {
				return err
			}
			if t == e.o.DefaultTopic {
				return fmt.Errorf("%s: subject %q, of the output topic, has no usable schema (%w); register one, name another subject, or set %s",
					e.o.SubjectSetting, e.o.Subject, err, e.o.SchemaSetting)
			}
			return fmt.Errorf("subject %q, of topic %q that the chain routes to, has no usable schema (%w); register one", t+e.o.Suffix, t, err)
		}
	}
	return nil
}

// Encode appends js's wire form with topic's schema to a new slice; an
// empty topic is the default output topic.
func (e *Encoders) Encode(ctx context.Context, topic string, js []byte) ([]byte, error) {
	if topic == "" {
		topic = e.o.DefaultTopic
	}
	enc, err := e.lookup(ctx, topic, false)
	if err != nil {
		return nil, err
	}
	return enc.Encode(nil, js)
}

// Refresh fetches the latest version of every subject in use but a
// schema file's, and switches to it when it changed. It keeps the old
// encoder of a subject it cannot fetch, and returns those errors joined.
func (e *Encoders) Refresh(ctx context.Context) error {
	e.mu.RLock()
	var topics []string
	for t, te := range e.topics {
		if te.enc != nil && !te.fixed {
			topics = append(topics, t)
		}
	}
	e.mu.RUnlock()
	var errs []error
	for _, t := range topics {
		subject := e.subject(t)
		s, err := e.o.Registry.Latest(ctx, subject)
		if err == nil && s.ID == e.current(t) {
			continue
		}
		var enc *schema.Encoder
		if err == nil {
			enc, err = e.newEncoder(ctx, s)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("subject %q: %w", subject, err))
			continue
		}
		e.store(t, &topicEncoder{enc: enc})
	}
	return errors.Join(errs...)
}

// Subjects returns the subject and schema id of each topic with an
// encoder, for the status page and the start's log line.
func (e *Encoders) Subjects() map[string]schema.Subject {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make(map[string]schema.Subject, len(e.topics))
	for t, te := range e.topics {
		if te.enc != nil {
			out[t] = te.enc.Subject()
		}
	}
	return out
}

// lookup returns topic's encoder, fetching the subject's latest schema
// when it has none yet (or, after a failure, once missingTTL has passed;
// at once with force). A registry that cannot be reached is not
// remembered: the next record asks again.
func (e *Encoders) lookup(ctx context.Context, topic string, force bool) (*schema.Encoder, error) {
	e.mu.RLock()
	te := e.topics[topic]
	e.mu.RUnlock()
	if te != nil && (te.enc != nil || (!force && time.Now().Before(te.retry))) {
		return te.enc, te.err
	}
	if e.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.o.Timeout)
		defer cancel()
	}
	subject := e.subject(topic)
	s, err := e.o.Registry.Latest(ctx, subject)
	var enc *schema.Encoder
	if err == nil {
		enc, err = e.newEncoder(ctx, s)
	}
	if err != nil {
		if f := schema.FaultOf(err); f == schema.FaultRegistry || f == schema.FaultCredentials {
			return nil, err
		}
		if !force {
			err = fmt.Errorf("topic %q has no usable schema under subject %q: %w", topic, subject, err)
		}
		e.store(topic, &topicEncoder{err: err, retry: time.Now().Add(missingTTL)})
		return nil, err
	}
	e.store(topic, &topicEncoder{enc: enc})
	return enc, nil
}

// newEncoder compiles s, which must be of the encoders' format.
func (e *Encoders) newEncoder(ctx context.Context, s schema.Subject) (*schema.Encoder, error) {
	if s.Schema.Type != e.o.Format {
		return nil, &schema.Error{Fault: schema.FaultSchema, Err: fmt.Errorf("subject %q version %d (schema id %d) is a %s schema, and the outputs are %s",
			s.Subject, s.Version, s.ID, s.Schema.Type, e.o.Format)}
	}
	return schema.NewEncoder(ctx, e.o.Registry, s, schema.EncoderOptions{Message: e.o.Message})
}

// subject is topic's subject: the configured one for the default topic,
// else the topic name strategy's.
func (e *Encoders) subject(topic string) string {
	if topic == e.o.DefaultTopic {
		return e.o.Subject
	}
	return topic + e.o.Suffix
}

// current returns the schema id topic encodes with now.
func (e *Encoders) current(topic string) int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if te := e.topics[topic]; te != nil && te.enc != nil {
		return te.enc.Subject().ID
	}
	return 0
}

func (e *Encoders) store(topic string, te *topicEncoder) {
	e.mu.Lock()
	e.topics[topic] = te
	e.mu.Unlock()
}
