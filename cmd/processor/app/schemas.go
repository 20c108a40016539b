package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/internal/tick"
	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/codec"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// schemas is what the key and value formats need (PROCESSOR_*_FORMAT):
// the Schema Registry's client, the schema files, and, once opened, the
// output encoders. nil when every format is raw.
type schemas struct {
	cfg        *config.Config
	client     schema.Registry
	key, value side
	names      codec.Names
}

// side is one part of a record's formats and output schema settings.
type side struct {
	in, out  schema.Format
	file     *schema.Schema // the schema file's, registered at start
	encoders *codec.Encoders
	decoder  *schema.Decoder
}

// loadSchemas reads what the formats need without the network: the
// registry's TLS files, password file and the schema files. Every error
// is a *settings.Error naming the variable; nil, nil when every format is
// raw.
func loadSchemas(cfg *config.Config) (*schemas, error) {
	if !cfg.UsesSchemaRegistry() {
		return nil, nil
	}
	s := &schemas{cfg: cfg}
	var err error
	if s.key, err = loadSide(cfg.KeyFormat, cfg.OutputKeyFormatOrDefault(), "OUTPUT_KEY_SCHEMA_FILE", cfg.OutputKeySchemaFile); err != nil {
		return nil, err
	}
	if s.value, err = loadSide(cfg.ValueFormat, cfg.OutputValueFormatOrDefault(), "OUTPUT_VALUE_SCHEMA_FILE", cfg.OutputValueSchemaFile); err != nil {
		return nil, err
	}
	urls := cfg.SchemaRegistryURL
	if cfg.EmbeddedSchemaRegistry {
		urls = []string{embeddedRegistryURL(cfg)}
	}
	opts := schema.ClientOptions{URLs: urls, Username: cfg.SchemaRegistryUsername, Password: cfg.SchemaRegistryPassword.Reveal()}
	if cfg.SchemaRegistryPasswordFile != "" {
		if opts.Password, err = readPassword("SCHEMA_REGISTRY_PASSWORD_FILE", cfg.SchemaRegistryPasswordFile, "the Schema Registry password"); err != nil {
			return nil, err
		}
	}
	if strings.HasPrefix(urls[0], "https:") || cfg.SchemaRegistryTLSCAFile != "" {
		if opts.TLS, err = tlsConfig(tlsFiles{prefix: "SCHEMA_REGISTRY_TLS_", ca: cfg.SchemaRegistryTLSCAFile, cert: cfg.SchemaRegistryTLSCertFile,
			key: cfg.SchemaRegistryTLSKeyFile, serverName: cfg.SchemaRegistryTLSServerName}); err != nil {
			return nil, err
		}
	}
	if s.client, err = schema.NewClient(opts); err != nil {
		return nil, &settings.Error{Var: config.EnvName("SCHEMA_REGISTRY_URL"), Value: strings.Join(urls, ","),
			Want: settings.Say("URLs of a Confluent-compatible Schema Registry (" + err.Error() + ")")}
	}
	s.names = codec.Names{Registry: config.EnvName("SCHEMA_REGISTRY_URL") + "=" + strings.Join(urls, ","),
		Credentials: config.EnvName("SCHEMA_REGISTRY_USERNAME") + " and _PASSWORD"}
	if cfg.EmbeddedSchemaRegistry {
		s.names.Registry = config.EnvName("EMBEDDED_SCHEMA_REGISTRY_ADDR") + "=" + cfg.EmbeddedSchemaRegistryAddr
	}
	return s, nil
}

// loadSide parses one part's formats and reads its schema file.
func loadSide(in, out schema.Format, fileTag, file string) (side, error) {
	sd := side{in: in, out: out}
	if file == "" {
		return sd, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return sd, fileError(fileTag, file, "a readable schema file", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return sd, fileError(fileTag, file, "a schema file", errors.New("it is empty"))
	}
	sd.file = &schema.Schema{Type: sd.out, Text: string(b)}
	return sd, nil
}

// embeddedRegistryURL is the URL of PROCESSOR_EMBEDDED_SCHEMA_REGISTRY's
// registry.
func embeddedRegistryURL(cfg *config.Config) string {
	addr := cfg.EmbeddedSchemaRegistryAddr
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	return "http://" + addr
}

// open readies the codecs: the input decoders, and the output encoders
// with their schemas registered or fetched (for the output topic and the
// fixed destinations of routing) of the parts that need them
// (needsEncoders): a part whose bytes pass through needs no output
// schema unless one was configured. A registry that cannot be reached is
// retried with backoff, the instance not ready meanwhile; refused
// credentials are a runtime failure (exit 1) and an unusable schema a
// configuration error (exit 2). ok is false when the processor must not
// run; code is then its exit code.
func (s *schemas) open(ctx context.Context, touches transform.Parts, routed []string, ep *endpoints, log *slog.Logger) (code int, ok bool) {
	cfg := s.cfg
	// A record runs for at most 2/5 of the transaction timeout (half its
	// budget) before the pipeline fails it; the registry lookups of one
	// record end at half that, so that a registry that hangs is an
	// outage, not records failed for running out of time.
	timeout := cfg.TransactionTimeout / 5
	for _, sd := range []*side{&s.key, &s.value} {
		if sd.in != schema.Raw {
			sd.decoder = schema.NewDecoder(s.client, sd.in, schema.DecoderOptions{Timeout: timeout})
		}
	}
	if s.key.needsEncoders(touches, transform.PartKey, cfg.OutputKeySubject) {
		s.key.encoders = codec.NewEncoders(codec.EncodersOptions{Registry: s.client, Format: s.key.out, Suffix: "-key",
			Strategy: schema.SubjectStrategy(cfg.KeySubjectStrategy), Message: cfg.OutputKeyMessage, DefaultTopic: cfg.OutputTopic,
			Subject: cfg.OutputKeySubject, Schema: s.key.file, SubjectSetting: config.EnvName("OUTPUT_KEY_SUBJECT"),
			SchemaSetting: config.EnvName("OUTPUT_KEY_SCHEMA_FILE"), StrategySettingName: config.EnvName("KEY_SUBJECT_STRATEGY"), Timeout: timeout})
	}
	if s.value.needsEncoders(touches, transform.PartValue, cfg.OutputValueSubject) {
		s.value.encoders = codec.NewEncoders(codec.EncodersOptions{Registry: s.client, Format: s.value.out, Suffix: "-value",
			Strategy: schema.SubjectStrategy(cfg.ValueSubjectStrategy), Message: cfg.OutputValueMessage, DefaultTopic: cfg.OutputTopic,
			Subject: cfg.OutputValueSubject, Schema: s.value.file, SubjectSetting: config.EnvName("OUTPUT_VALUE_SUBJECT"),
			SchemaSetting: config.EnvName("OUTPUT_VALUE_SCHEMA_FILE"), StrategySettingName: config.EnvName("VALUE_SUBJECT_STRATEGY"), Timeout: timeout})
	}
	ep.starting("fetching the output schemas from the Schema Registry")
	wait := backoff.New(startBackoff())
	for attempt := 1; ; attempt++ {
		err := s.startEncoders(ctx, routed)
		switch fault := schema.FaultOf(err); {
		case err == nil:
			if attempt > 1 {
				log.Info("the Schema Registry answers")
			}
			return exitOK, true
		case ctx.Err() != nil:
			log.Info("stopped while starting")
			return exitOK, false
		case fault == schema.FaultCredentials:
			log.Error("stopping: the Schema Registry at " + s.names.Registry + " refused the processor's credentials; check " +
				s.names.Credentials + ": " + err.Error())
			return exitRuntime, false
		case fault != schema.FaultRegistry:
			return configError(err), false
		}
		what := "the Schema Registry at " + s.names.Registry + " cannot be reached; retrying"
		ep.starting(what)
		retryIn := wait.Next()
		log.Warn(what, "attempt", attempt, "retry_in", retryIn.String(), "err", err.Error())
		if backoff.Sleep(ctx, retryIn) != nil {
			log.Info("stopped while starting")
			return exitOK, false
		}
	}
}

// needsEncoders reports whether the side, part of the records, needs
// output encoders: its outputs are schema-encoded and the chain encodes
// them (codec.Framed), or a subject or schema file was configured for
// them, which is then checked at start all the same. A part whose bytes
// pass through needs no <topic>-key or -value subject of its own.
func (sd *side) needsEncoders(touches, part transform.Parts, subject string) bool {
	return sd.out != schema.Raw && (codec.Framed(touches, part, sd.in, sd.out) || subject != "" || sd.file != nil)
}

// startEncoders starts the output encoders of both parts.
func (s *schemas) startEncoders(ctx context.Context, routed []string) error {
	for _, sd := range []*side{&s.key, &s.value} {
		if sd.encoders == nil {
			continue
		}
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := sd.encoders.Start(octx, routed)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// frame places the decode and encode stages around every chain, as far
// as the chain touches keys and values (a chain that touches neither
// passes the bytes through), and returns what it placed, for the log.
// Each chain gets stages of its own (codec.Plan: under a record strategy
// they carry the type of the input in flight); every chain is built
// alike, so the first's parts decide for all.
func (s *schemas) frame(chains []*transform.Chain) (decodes, encodes bool) {
	touches := chains[0].Touches()
	for _, c := range chains {
		first, last := codec.Plan(touches,
			codec.Side{In: s.key.in, Out: s.key.out, Decoder: s.key.decoder, Encoders: s.key.encoders},
			codec.Side{In: s.value.in, Out: s.value.out, Decoder: s.value.decoder, Encoders: s.value.encoders}, s.names)
		c.Frame(first, last)
		decodes, encodes = first != nil, last != nil
	}
	return decodes, encodes
}

// refresh fetches the output subjects' latest versions every
// PROCESSOR_OUTPUT_SCHEMA_REFRESH_INTERVAL until ctx ends.
func (s *schemas) refresh(ctx context.Context, log *slog.Logger) {
	tick.Every(ctx, s.cfg.OutputSchemaRefreshInterval, func(time.Time) {
		for _, sd := range []*side{&s.key, &s.value} {
			if sd.encoders == nil {
				continue
			}
			before := sd.encoders.Subjects()
			if err := sd.encoders.Refresh(ctx); err != nil && ctx.Err() == nil {
				log.Warn("refreshing the output schemas failed; the current ones stay in use", "err", err.Error())
			}
			for tg, now := range sd.encoders.Subjects() {
				if was, ok := before[tg]; ok && was.ID != now.ID {
					log.Info("a new output schema version is in use", "topic", tg.Topic, "record_type", tg.Type, "subject", now.Subject,
						"version", now.Version, "schema_id", now.ID, "was_schema_id", was.ID)
				}
			}
		}
	})
}

// logAttrs are the formats and output subjects for the start's log line.
func (s *schemas) logAttrs() []any {
	if s == nil {
		return nil
	}
	attrs := []any{"key_format", string(s.key.in) + "->" + string(s.key.out), "value_format", string(s.value.in) + "->" + string(s.value.out)}
	if st := s.cfg.KeySubjectStrategy; st != "" && st != string(schema.TopicStrategy) {
		attrs = append(attrs, "key_subject_strategy", st)
	}
	if st := s.cfg.ValueSubjectStrategy; st != "" && st != string(schema.TopicStrategy) {
		attrs = append(attrs, "value_subject_strategy", st)
	}
	for _, sd := range []*side{&s.key, &s.value} {
		if sd.encoders == nil {
			continue
		}
		for tg, subj := range sd.encoders.Subjects() {
			name := "output_subject_" + tg.Topic
			if tg.Type != "" {
				name += "_" + tg.Type
			}
			attrs = append(attrs, name, fmt.Sprintf("%s v%d (id %d)", subj.Subject, subj.Version, subj.ID))
		}
	}
	return attrs
}

// openSchemas starts the embedded registry when configured, readies the
// codecs, frames the chains with them and starts refreshing the output
// schemas; stop ends both. ok is false when the processor must not run,
// with its exit code.
func (s *startup) openSchemas(ctx context.Context, ep *endpoints) (stop func(), code int, ok bool) {
	var closeRegistry func()
	if s.cfg.EmbeddedSchemaRegistry {
		ep.starting("starting the embedded Schema Registry")
		c, err := startEmbeddedRegistry(ctx, s.cfg, s.log)
		if err != nil {
			s.log.Error("starting the embedded Schema Registry failed", "err", err.Error())
			return nil, exitRuntime, false
		}
		closeRegistry = c
	}
	var routed []string
	for _, d := range s.chains[0].Destinations() {
		routed = append(routed, d.Topic)
	}
	if code, ok := s.sch.open(ctx, s.chains[0].Touches(), routed, ep, s.log); !ok {
		if closeRegistry != nil {
			closeRegistry()
		}
		return nil, code, false
	}
	decodes, encodes := s.sch.frame(s.chains)
	if !decodes && !encodes {
		s.log.Info("the chain touches no schema-encoded key or value: their bytes pass through undecoded")
	}
	rctx, cancel := context.WithCancel(ctx)
	go s.sch.refresh(rctx, s.log)
	return func() {
		cancel()
		if closeRegistry != nil {
			closeRegistry()
		}
	}, exitOK, true
}

// formats are cfg's key and value formats other than raw, for /status
// and the status page; nil when all are raw.
func formats(cfg *config.Config) map[string]string {
	var m map[string]string
	for k, v := range map[string]schema.Format{"key": cfg.KeyFormat, "value": cfg.ValueFormat,
		"output_key": cfg.OutputKeyFormatOrDefault(), "output_value": cfg.OutputValueFormatOrDefault()} {
		if v != "raw" {
			if m == nil {
				m = map[string]string{}
			}
			m[k] = string(v)
		}
	}
	return m
}

// tableDecoder returns what decodes a join table's row values as the
// inputs' values are (PROCESSOR_VALUE_FORMAT), nil when they are raw
// (JSON) or s is nil.
func (s *schemas) tableDecoder(ctx context.Context) func([]byte) ([]byte, error) {
	if s == nil || s.value.decoder == nil {
		return nil
	}
	dec := s.value.decoder
	return func(b []byte) ([]byte, error) { return dec.Decode(ctx, b, nil) }
}
