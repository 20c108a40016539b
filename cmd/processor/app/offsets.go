package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/interrupt"
	"github.com/streamproc/processor/offsets"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
)

// `processor offsets`: the group's offsets on its input topics, shown or
// reset (package offsets), configured by the same PROCESSOR_* variables
// as the processor (brokers, security, group, input topics, sink).

const offsetsUsage = `usage: processor offsets [-replay] [-json]
       processor offsets reset -to earliest|latest|<RFC 3339 time>|<-duration>|<offset> [-topic T [-partition P]] [-replay] [-execute] [-json]
A reset is a dry run unless -execute; it is refused (exit 1) while the group has members.
-replay: the offsets of processor replay's group (<PROCESSOR_GROUP>-replay) on PROCESSOR_DLQ_TOPIC.`

// offsetsTimeout bounds the whole command.
const offsetsTimeout = 2 * time.Minute

// offsetsFlags are the command's flags.
type offsetsFlags struct {
	reset, execute, asJSON bool
	replay                 bool // processor replay's group on the dead-letter topic
	to, topic              string
	partition              int
}

// parseOffsetsFlags reads the command line; ok false means code is the
// exit code (usage printed, or a bad flag).
func parseOffsetsFlags(args []string, stderr io.Writer) (f offsetsFlags, code int, ok bool) {
	f.partition = -1
	if len(args) > 0 && args[0] == "reset" {
		f.reset, args = true, args[1:]
	}
	fs := newFlags("offsets")
	fs.BoolVar(&f.asJSON, "json", false, "JSON instead of a table")
	fs.BoolVar(&f.replay, "replay", false, "processor replay's group on the dead-letter topic")
	if f.reset {
		fs.StringVar(&f.to, "to", "", "where to move the offsets")
		fs.StringVar(&f.topic, "topic", "", "only this input topic")
		fs.IntVar(&f.partition, "partition", -1, "only this partition of -topic")
		fs.BoolVar(&f.execute, "execute", false, "apply the reset (default: a dry run)")
	}
	code, ok = parseFlags(fs, args, offsetsUsage, stderr, func() error {
		switch {
		case f.reset && f.to == "":
			return errors.New("reset needs -to")
		case f.partition >= 0 && f.topic == "":
			return errors.New("-partition needs -topic")
		}
		return nil
	})
	return f, code, ok
}

// runOffsets is `processor offsets`: exit 0 when done, 1 when the
// cluster or the database fails it or a reset is refused because the
// group has members, 2 for a bad flag or setting.
func runOffsets(args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseOffsetsFlags(args, stderr)
	if !ok {
		return code
	}
	var target offsets.Target
	if f.reset {
		var err error
		if target, err = offsets.ParseTarget(f.to, time.Now()); err != nil {
			fmt.Fprintf(stderr, "processor offsets: %v\n", err)
			return exitConfig
		}
	}
	ctx, stop := interrupt.Context()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, offsetsTimeout)
	defer cancel()
	tool, closeTool, err := openOffsetsTool(ctx, f.replay)
	if err != nil {
		var ce *settings.Error
		if errors.As(err, &ce) {
			fmt.Fprintln(stderr, "processor offsets: configuration error: "+oneLine(err.Error()))
			return exitConfig
		}
		fmt.Fprintln(stderr, "processor offsets: "+oneLine(err.Error()))
		return exitRuntime
	}
	defer closeTool()
	if !f.reset {
		return offsetsDone(stderr, showOffsets(ctx, tool, f, stdout))
	}
	return offsetsDone(stderr, resetOffsets(ctx, tool, f, target, stdout))
}

// offsetsDone prints err, if any, and returns the exit code.
func offsetsDone(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var sel *offsets.SelectionError
	var missing *offsets.MissingTopicError
	if errors.As(err, &sel) || errors.As(err, &missing) {
		fmt.Fprintln(stderr, "processor offsets: "+err.Error())
		return exitConfig
	}
	fmt.Fprintln(stderr, "processor offsets: "+oneLine(err.Error()))
	return exitRuntime
}

func showOffsets(ctx context.Context, tool *offsets.Tool, f offsetsFlags, stdout io.Writer) error {
	ps, err := tool.Show(ctx)
	if err != nil {
		return err
	}
	return offsets.WriteTable(stdout, tool.Group, ps, f.asJSON)
}

func resetOffsets(ctx context.Context, tool *offsets.Tool, f offsetsFlags, target offsets.Target, stdout io.Writer) error {
	sel := offsets.Selection{Topic: f.topic, Partition: int32(f.partition), HasPartition: f.partition >= 0}
	plan, err := tool.Plan(ctx, target, sel)
	if err != nil {
		return err
	}
	if !f.execute {
		return offsets.WritePlan(stdout, tool.Group, target, plan, false, f.asJSON)
	}
	if _, err := tool.Apply(ctx, plan); err != nil {
		return err
	}
	return offsets.WritePlan(stdout, tool.Group, target, plan, true, f.asJSON)
}

// openOffsetsTool reads the configuration and connects: the admin client
// and, with a database sink, the database; with replay, the tool is on
// the replay's group and the dead-letter topic, in Kafka. A bad setting
// is a *settings.Error.
func openOffsetsTool(ctx context.Context, replay bool) (*offsets.Tool, func(), error) {
	cfg, err := config.Load(config.Hostname())
	if err != nil {
		return nil, nil, err
	}
	sec, err := loadSecurity(cfg, newLogger(cfg))
	if err != nil {
		return nil, nil, err
	}
	dest, err := chooseSink(sink.Default, cfg)
	if err != nil {
		return nil, nil, err
	}
	brokers := toolBrokers(cfg)
	adm, err := dialConn(cfg, sec, brokers).admin()
	if err != nil {
		return nil, nil, fmt.Errorf("a client of %v: %w", brokers, err)
	}
	tool := &offsets.Tool{Admin: adm, Group: cfg.Group, Topics: cfg.InputTopics}
	if replay {
		if cfg.DLQTopic == "" {
			adm.Close()
			return nil, nil, &settings.Error{Var: config.EnvName("DLQ_TOPIC"), Want: settings.Say("the dead-letter topic processor replay reads (-replay)")}
		}
		tool.Group, tool.Topics = cfg.Group+"-replay", []string{cfg.DLQTopic}
		return tool, adm.Close, nil
	}
	if dest == nil {
		return tool, adm.Close, nil
	}
	db, err := openOffsetsDatabase(ctx, dest, cfg.Group)
	if err != nil {
		adm.Close()
		return nil, nil, err
	}
	tool.Store = &offsets.DatabaseStore{DB: db.stored, Name: dest.name, Kafka: &offsets.KafkaStore{Admin: adm, Group: cfg.Group}}
	return tool, func() { db.close(); adm.Close() }, nil
}

// offsetsDatabase is an open database sink that keeps offsets.
type offsetsDatabase struct {
	stored offsets.StoredOffsets
	close  func()
}

// openOffsetsDatabase opens the destination, which must keep offsets the
// tool can read and set (a sink.OffsetSetter, as the postgres sink is).
func openOffsetsDatabase(ctx context.Context, dest *destination, group string) (*offsetsDatabase, error) {
	log := slog.New(slog.DiscardHandler)
	db, err := dest.open(ctx, group, prometheus.NewRegistry(), log)
	if err != nil {
		return nil, err
	}
	stored, ok := db.dest.(sink.OffsetSetter)
	if !ok {
		db.close()
		return nil, &settings.Error{Var: config.EnvName("SINK"), Value: dest.name,
			Want: settings.Say("kafka or a sink whose stored offsets processor offsets can set: sink " + dest.name + " keeps no offsets processor offsets can read")}
	}
	return &offsetsDatabase{stored: stored, close: db.close}, nil
}
