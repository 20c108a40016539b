package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/interrupt"
	"github.com/streamproc/processor/offsets"
	"github.com/streamproc/processor/replay"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/transform"
)

// `processor replay`: the dead letters of PROCESSOR_DLQ_TOPIC run through
// the configured chain again, exactly once (package replay), in the
// consumer group <PROCESSOR_GROUP>-replay unless -group names another.

const replayUsage = `usage: processor replay [-since T] [-until T] [-from N] [-to N] [-partition P] [-error TEXT] [-header NAME=VALUE] [-group G]
Runs the dead letters of PROCESSOR_DLQ_TOPIC through the chain again, exactly once, up to the topic's end as it is at
start, then exits 0. T: an RFC 3339 time or a duration back (-1h); -from/-to: offsets of the dead-letter topic
(-to excluded); -error: processor.error contains TEXT; -header: the dead letter carries the header with that value.
Progress is the group's (default <PROCESSOR_GROUP>-replay): a replay stopped or killed resumes where it was.`

// replayPoll is how often the replay group's committed offsets are read
// to see whether the replay has reached its stop.
const replayPoll = 250 * time.Millisecond

// replayFlags are the command line of `processor replay`.
type replayFlags struct {
	filter replay.Filter
	group  string
}

// parseReplayFlags reads the command line; ok false means code is the
// exit code (usage printed, or a mistake).
func parseReplayFlags(args []string, now time.Time, stderr io.Writer) (f replayFlags, code int, ok bool) {
	f.filter = replay.All()
	fs := newFlags("replay")
	since := fs.String("since", "", "only dead letters stamped at or after this time")
	until := fs.String("until", "", "only dead letters stamped before this time")
	fs.Int64Var(&f.filter.From, "from", -1, "only dead letters at or after this offset")
	fs.Int64Var(&f.filter.To, "to", -1, "only dead letters before this offset")
	part := fs.Int("partition", -1, "only this partition of the dead-letter topic")
	fs.StringVar(&f.filter.Error, "error", "", "only dead letters whose processor.error contains this")
	hdr := fs.String("header", "", "only dead letters with this header, NAME=VALUE")
	fs.StringVar(&f.group, "group", "", "the replay's consumer group")
	code, ok = parseFlags(fs, args, replayUsage, stderr, func() error {
		f.filter.Partition = int32(*part)
		if err := f.times(*since, *until, now); err != nil {
			return err
		}
		if *hdr != "" {
			name, value, found := splitHeader(*hdr)
			if !found {
				return fmt.Errorf("-header %q: want NAME=VALUE", *hdr)
			}
			f.filter.Header, f.filter.HeaderValue = name, value
		}
		if f.filter.From >= 0 && f.filter.To >= 0 && f.filter.To <= f.filter.From {
			return fmt.Errorf("-to %d: want an offset above -from %d", f.filter.To, f.filter.From)
		}
		return nil
	})
	return f, code, ok
}

// times reads -since and -until: RFC 3339 times or durations back.
func (f *replayFlags) times(since, until string, now time.Time) error {
	for _, x := range []struct {
		name, v string
		to      *time.Time
	}{{"-since", since, &f.filter.Since}, {"-until", until, &f.filter.Until}} {
		if x.v == "" {
			continue
		}
		t, err := offsets.ParseTarget(x.v, now)
		if err != nil || t.Kind != offsets.AtTime {
			return fmt.Errorf("%s %q: want an RFC 3339 time (2026-12-06T07:00:00Z) or a duration back from now (-1h)", x.name, x.v)
		}
		*x.to = t.Time
	}
	return nil
}

func splitHeader(s string) (name, value string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return s[:i], s[i+1:], i > 0
		}
	}
	return "", "", false
}

// runReplay is `processor replay`: exit 0 once the replay group has
// committed the dead-letter topic up to the end captured at start, 1 when
// it fails or is stopped before, 2 for a bad flag or setting.
func runReplay(args []string, reg *transform.Registry, stdout, stderr io.Writer) int {
	f, code, ok := parseReplayFlags(args, time.Now(), stderr)
	if !ok {
		return code
	}
	ctx, stop := interrupt.Context()
	defer stop()
	s, code := setUpReplay(reg, f, stderr)
	if s == nil {
		return code
	}
	defer s.closeChains()
	return s.replay(ctx, f, stdout)
}

// setUpReplay loads and checks the configuration for a replay: the
// processor's, with the dead-letter topic as its input, the replay's
// group and a transactional ID of its own.
func setUpReplay(reg *transform.Registry, f replayFlags, stderr io.Writer) (*startup, int) {
	fail := func(err error) (*startup, int) {
		fmt.Fprintln(stderr, "processor replay: configuration error: "+oneLine(err.Error()))
		return nil, exitConfig
	}
	cfg, err := config.Load(config.Hostname())
	if err != nil {
		return fail(err)
	}
	dest, err := chooseSink(sink.Default, cfg)
	switch {
	case err != nil:
		return fail(err)
	case dest != nil:
		return fail(&settings.Error{Var: config.EnvName("SINK"), Value: cfg.Sink,
			Want: settings.Say("kafka: with a database sink dead letters are rows of its dead-letter table, not records of a topic to replay")})
	case cfg.DLQTopic == "":
		return fail(&settings.Error{Var: config.EnvName("DLQ_TOPIC"), Want: settings.Say("the dead-letter topic to replay")})
	}
	rc := *cfg
	rc.Group = f.group
	if rc.Group == "" {
		rc.Group = cfg.Group + "-replay"
	}
	rc.InputTopics, rc.TransactionalID, rc.InstanceID = []string{cfg.DLQTopic}, cfg.TransactionalID+"-replay", ""
	rc.StartOffset = "earliest"
	s := &startup{cfg: &rc, log: newLogger(cfg)}
	s.chains, err = buildChains(reg, &rc, workers(&rc))
	if err != nil {
		return fail(err)
	}
	if js := s.chains[0].Joins(); len(js) > 0 {
		s.closeChains()
		return fail(&settings.Error{Var: config.EnvName("TRANSFORMS"), Value: js[0].Entry.String(),
			Want: settings.Say("a chain without a stage reading a table (a join, a wasm stage with TABLES): replaying through one is not supported yet")})
	}
	for _, check := range []func() error{
		func() error {
			if s.prep, err = Prepare(&rc, s.chains, s.log, Overrides{Replay: true}); err == nil {
				s.sec = s.prep.sec
			}
			return err
		},
		func() error { s.sch, err = loadSchemas(&rc); return err },
	} {
		if err := check(); err != nil {
			s.closeChains()
			return fail(err)
		}
	}
	return s, exitOK
}

// replay runs the pipeline on the dead-letter topic until the replay
// group has committed it up to the end captured at start.
func (s *startup) replay(ctx context.Context, f replayFlags, stdout io.Writer) int {
	cfg, log := s.cfg, s.log
	brokers := toolBrokers(cfg)
	adm, err := dialConn(cfg, s.sec, brokers).admin()
	if err != nil {
		log.Error("creating the Kafka client", "err", err.Error())
		return exitRuntime
	}
	defer adm.Close()
	b, err := replay.Capture(ctx, adm, cfg.Group, cfg.DLQTopic)
	var missing *replay.MissingTopicError
	switch {
	case errors.As(err, &missing):
		return configError(err)
	case err != nil:
		log.Error("reading the dead-letter topic's offsets", "err", err.Error())
		return exitRuntime
	}
	log.Info("replaying dead letters", "topic", cfg.DLQTopic, "group", cfg.Group, "records_left", b.Left(), "stop", fmt.Sprint(b.Stop))
	if b.Left() == 0 {
		fmt.Fprintf(stdout, "nothing to replay: group %s has read %s up to its end\n", cfg.Group, cfg.DLQTopic)
		return exitOK
	}
	if s.sch != nil {
		stopSchemas, code, ok := s.openSchemas(ctx, newEndpoints(cfg, s.chains[0], len(s.chains)))
		if !ok {
			return code
		}
		defer stopSchemas()
	}
	for _, c := range s.chains { // first, before a schema decode
		c.Frame([]transform.Stage{{Name: "replay", T: &replay.Restore{Filter: f.filter}}}, nil)
	}
	in, err := s.prep.build(brokers, prometheus.NewRegistry(), reached{stopAt: b.StopAt()})
	if err != nil {
		log.Error("building the replay", "err", err.Error())
		return exitRuntime
	}
	p := in.Pipeline
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- in.Run(rctx) }()
	reached, err := s.waitReached(rctx, adm, b, done)
	cancel()
	if reached {
		err = <-done
	}
	st := p.Stats()
	switch {
	case reached && (err == nil || errors.Is(err, context.Canceled)):
		fmt.Fprintf(stdout, "replayed %s up to %v: %d records read, %d outputs written\n", cfg.DLQTopic, b.Stop, st.Consumed, st.Produced)
		return exitOK
	case err == nil || errors.Is(err, context.Canceled):
		fmt.Fprintf(stdout, "stopped before the end: %d records read, %d outputs written; run again to resume\n", st.Consumed, st.Produced)
		return exitRuntime
	}
	return exitCode(err, cfg, s.prep.required, p, log)
}

// waitReached waits until the replay group has reached b's stops (true),
// the pipeline has returned (false, its error), or ctx ends.
func (s *startup) waitReached(ctx context.Context, adm *kadm.Client, b *replay.Bounds, done <-chan error) (bool, error) {
	t := time.NewTicker(replayPoll)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return false, err
		case <-ctx.Done():
			return false, <-done
		case <-t.C:
			ok, err := b.Reached(ctx, adm, s.cfg.Group)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("reading the replay group's offsets", "err", err.Error())
			}
			if ok {
				return true, nil
			}
		}
	}
}
