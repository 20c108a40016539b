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
	// Suffix makes a topic's subject under the topic name strategy:
	// "-key" or "-value".
	Suffix string
	// Strategy names the subject of each output (schema.TopicStrategy
	// when empty). With schema.RecordStrategy or TopicRecordStrategy an
	// output's subject is named by its record type: the schema file's
	// when Schema is set, else the one Encode is given (its input's);
	// Subject must then be empty, and Message is used only with Schema
	// (without it an output is the message its type names).
	Strategy schema.SubjectStrategy
	// Message is the Protobuf message outputs are (default: the schema's
	// first).
	Message string
	// DefaultTopic is the topic of outputs that no transform routed.
	DefaultTopic string
	// Subject is DefaultTopic's subject under the topic name strategy;
	// empty: DefaultTopic + Suffix.
	Subject string
	// Schema, when set, is registered under DefaultTopic's subject at
	// Start (Subject, or the record strategy's subject of its record
	// name) and encodes every output to DefaultTopic; the registry
	// refusing it fails Start. Unset, the subject's latest version does,
	// refreshed by Refresh.
	Schema *schema.Schema
	// SubjectSetting, SchemaSetting and StrategySettingName name the
	// settings of Subject, Schema and Strategy in errors, e.g.
	// PROCESSOR_OUTPUT_VALUE_SUBJECT, PROCESSOR_VALUE_SUBJECT_STRATEGY.
	SubjectSetting, SchemaSetting, StrategySettingName string
	// Timeout bounds fetching a topic's schema when it has none yet (the
	// first output to a routed topic, say) as a whole; 0 means no bound
	// but the client's per request (schema.DecoderOptions.Timeout).
	Timeout time.Duration
}

// StrategySetting names the strategy's setting with its value, for
// errors, e.g. PROCESSOR_VALUE_SUBJECT_STRATEGY=record.
func (o EncodersOptions) StrategySetting() string {
	name := o.StrategySettingName
	if name == "" {
		name = "the subject name strategy"
	}
	return name + "=" + string(o.Strategy)
}

// Encoders hands out the encoder of each output topic and, under a
// record strategy, record type: the latest schema of its subject,
// fetched once and refreshed, so that no record costs a registry call.
// It is safe for concurrent use.
type Encoders struct {
	o EncodersOptions
	// fileType is the schema file's record name under a record strategy.
	fileType string
	mu       sync.RWMutex
	targets  map[Target]*topicEncoder
}

// Target is what an output's subject is named by: its topic and, under a
// record strategy, its record type (empty under the topic strategy).
type Target struct {
	Topic, Type string
}

// topicEncoder is one target's encoder, or why it has none (until retry).
type topicEncoder struct {
	enc   *schema.Encoder
	err   error
	retry time.Time // with err: when to ask the registry again
	fixed bool      // the schema file's: never refreshed
}

// NewEncoders returns the encoders of o; Start readies them.
func NewEncoders(o EncodersOptions) *Encoders {
	if o.Strategy == "" {
		o.Strategy = schema.TopicStrategy
	}
	if o.Subject == "" && !o.Strategy.ByRecord() {
		o.Subject = o.DefaultTopic + o.Suffix
	}
	return &Encoders{o: o, targets: map[Target]*topicEncoder{}}
}

// Named reports whether Encode needs each output's record type: under a
// record strategy without a schema file.
func (e *Encoders) Named() bool { return e.o.Strategy.ByRecord() && e.o.Schema == nil }

// Start registers the configured schema, or fetches the latest schema of
// the default topic's subject and of each of topics' (fixed destinations
// of routing). Under a record strategy without a schema file the types
// are known only as records come, and Start fetches nothing. A
// *schema.Error of FaultSchema is a configuration mistake (a schema that
// does not compile or has no record name, a subject without versions, a
// schema the registry refuses as incompatible); FaultRegistry is worth
// retrying.
func (e *Encoders) Start(ctx context.Context, topics []string) error {
	if e.o.Schema != nil {
		subject := e.o.Subject
		if e.o.Strategy.ByRecord() {
			name, err := schema.RecordName(ctx, e.o.Registry, *e.o.Schema, e.o.Message)
			if err != nil {
				return fmt.Errorf("%s, under %s: %w", e.o.SchemaSetting, e.o.StrategySetting(), err)
			}
			e.fileType = name
			subject = e.o.Strategy.Subject(e.o.DefaultTopic, e.o.Suffix, name)
		}
		s, err := e.o.Registry.Register(ctx, subject, *e.o.Schema)
		if err != nil {
			return fmt.Errorf("registering %s under subject %q (%s): %w", e.o.SchemaSetting, subject, e.subjectSource(), err)
		}
		enc, err := e.newEncoder(ctx, s, e.o.Message)
		if err != nil {
			return fmt.Errorf("%s: %w", e.o.SchemaSetting, err)
		}
		e.store(Target{e.o.DefaultTopic, e.fileType}, &topicEncoder{enc: enc, fixed: true})
	}
	if e.Named() {
		return nil
	}
	for _, t := range append([]string{e.o.DefaultTopic}, topics...) {
		tg := Target{t, e.fileType}
		if _, err := e.lookup(ctx, tg, true); err != nil {
			if schema.FaultOf(err) != schema.FaultSchema {
				return err
			}
			if t == e.o.DefaultTopic {
				return fmt.Errorf("%s: subject %q, of the output topic, has no usable schema (%w); register one, name another subject, or set %s",
					e.o.SubjectSetting, e.o.Subject, err, e.o.SchemaSetting)
			}
			return fmt.Errorf("subject %q, of topic %q that the chain routes to, has no usable schema (%w); register one", e.subject(tg), t, err)
		}
	}
	return nil
}

// subjectSource names what named the schema file's subject, for errors.
func (e *Encoders) subjectSource() string {
	if e.o.Strategy.ByRecord() {
		return e.o.StrategySetting()
	}
	return e.o.SubjectSetting
}

// Encode appends js's wire form with the schema of its subject to a new
// slice; an empty topic is the default output topic. typ is the output's
// record type (its input's record name, schema.Decoder.DecodeNamed), used
// when Named; an empty one then fails the record.
func (e *Encoders) Encode(ctx context.Context, topic, typ string, js []byte) ([]byte, error) {
	if topic == "" {
		topic = e.o.DefaultTopic
	}
	tg := Target{Topic: topic}
	switch {
	case !e.o.Strategy.ByRecord():
	case e.o.Schema != nil:
		tg.Type = e.fileType
	case typ == "":
		return nil, &schema.Error{Fault: schema.FaultRecord, Err: fmt.Errorf("the output has no record type for %s to name its subject by: its input's schema has no record name (an Avro union, a JSON schema without a title)",
			e.o.StrategySetting())}
	default:
		tg.Type = typ
	}
	enc, err := e.lookup(ctx, tg, false)
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
	var targets []Target
	for t, te := range e.targets {
		if te.enc != nil && !te.fixed {
			targets = append(targets, t)
		}
	}
	e.mu.RUnlock()
	var errs []error
	for _, t := range targets {
		subject := e.subject(t)
		s, err := e.o.Registry.Latest(ctx, subject)
		if err == nil && s.ID == e.current(t) {
			continue
		}
		var enc *schema.Encoder
		if err == nil {
			enc, err = e.newEncoder(ctx, s, e.message(t))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("subject %q: %w", subject, err))
			continue
		}
		e.store(t, &topicEncoder{enc: enc})
	}
	return errors.Join(errs...)
}

// Subjects returns the subject and schema id of each target with an
// encoder, for the status page and the start's log line.
func (e *Encoders) Subjects() map[Target]schema.Subject {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make(map[Target]schema.Subject, len(e.targets))
	for t, te := range e.targets {
		if te.enc != nil {
			out[t] = te.enc.Subject()
		}
	}
	return out
}

// lookup returns tg's encoder, fetching its subject's latest schema
// when it has none yet (or, after a failure, once missingTTL has passed;
// at once with force). A registry that cannot be reached is not
// remembered: the next record asks again.
func (e *Encoders) lookup(ctx context.Context, tg Target, force bool) (*schema.Encoder, error) {
	e.mu.RLock()
	te := e.targets[tg]
	e.mu.RUnlock()
	if te != nil && (te.enc != nil || (!force && time.Now().Before(te.retry))) {
		return te.enc, te.err
	}
	if e.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.o.Timeout)
		defer cancel()
	}
	subject := e.subject(tg)
	s, err := e.o.Registry.Latest(ctx, subject)
	var enc *schema.Encoder
	if err == nil {
		enc, err = e.newEncoder(ctx, s, e.message(tg))
	}
	if err != nil {
		if f := schema.FaultOf(err); f == schema.FaultRegistry || f == schema.FaultCredentials {
			return nil, err
		}
		if !force {
			err = fmt.Errorf("topic %q has no usable schema under subject %q: %w", tg.Topic, subject, err)
		}
		e.store(tg, &topicEncoder{err: err, retry: time.Now().Add(missingTTL)})
		return nil, err
	}
	e.store(tg, &topicEncoder{enc: enc})
	return enc, nil
}

// newEncoder compiles s, which must be of the encoders' format; message
// is the Protobuf message outputs are.
func (e *Encoders) newEncoder(ctx context.Context, s schema.Subject, message string) (*schema.Encoder, error) {
	if s.Schema.Type != e.o.Format {
		return nil, &schema.Error{Fault: schema.FaultSchema, Err: fmt.Errorf("subject %q version %d (schema id %d) is a %s schema, and the outputs are %s",
			s.Subject, s.Version, s.ID, s.Schema.Type, e.o.Format)}
	}
	return schema.NewEncoder(ctx, e.o.Registry, s, schema.EncoderOptions{Message: message})
}

// message is the Protobuf message of tg's outputs: the configured one,
// or under a record strategy without a schema file the record type.
func (e *Encoders) message(tg Target) string {
	if e.Named() && e.o.Format == schema.Protobuf {
		return tg.Type
	}
	return e.o.Message
}

// subject is tg's subject: the configured one for the default topic
// under the topic strategy, else the strategy's.
func (e *Encoders) subject(tg Target) string {
	if tg.Topic == e.o.DefaultTopic && !e.o.Strategy.ByRecord() {
		return e.o.Subject
	}
	return e.o.Strategy.Subject(tg.Topic, e.o.Suffix, tg.Type)
}

// current returns the schema id tg encodes with now.
func (e *Encoders) current(tg Target) int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if te := e.targets[tg]; te != nil && te.enc != nil {
		return te.enc.Subject().ID
	}
	return 0
}

func (e *Encoders) store(tg Target, te *topicEncoder) {
	e.mu.Lock()
	e.targets[tg] = te
	e.mu.Unlock()
}
