package app

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/pipeline/pipelinetest"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// `processor try [-file F] [-format auto|kv|json]` runs the configured
// chain over sample records with no broker: the real loop
// (pipeline.New and Run) on a pipelinetest.Driver, under the same PROCESSOR_*
// settings, so the error policy, retries, timeouts and limits apply as
// they do in the processor. It prints one JSON line per input
// (tryLine) and exits 0 when the chain succeeded on every record, 1 when
// a record failed (dead-lettered, skipped, or failed under
// PROCESSOR_ON_ERROR=fail), 2 for bad configuration or unreadable input.

// The settings try supplies when unset: it connects to nothing, so the
// processor's required connection and group settings must not stop it.
const (
	tryBrokers     = "127.0.0.1:9092"
	tryGroup       = "try"
	tryInputTopic  = "try"
	tryOutputTopic = "try-output"
)

// runTry is `processor try` with its arguments; it returns the exit code.
func runTry(args []string, reg *transform.Registry, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("processor try", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "read the sample records from this file (default: stdin)")
	format := fs.String("format", "auto", "auto, kv (key<TAB>value lines) or json (JSON lines)")
	topics := fs.String("topics", "", "comma-separated topics that exist: outputs to others fail as on a cluster without them (default: every topic exists)")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	if fs.NArg() > 0 || (*format != "auto" && *format != "kv" && *format != "json") {
		fmt.Fprintln(stderr, "processor: usage: processor try [-file F] [-format auto|kv|json] [-topics T1,T2]")
		return exitConfig
	}
	cfg, err := loadTryConfig()
	if err != nil {
		return tryConfigError(stderr, withUnknownVars(reg, err))
	}
	in := stdin
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return tryConfigError(stderr, fmt.Errorf("-file: %w", err))
		}
		defer f.Close()
		in = f
	}
	recs, err := readSamples(in, *format, cfg.InputTopics[0])
	if err != nil {
		return tryConfigError(stderr, err)
	}
	log := newLogger(cfg)
	if err := checkUnknownVars(log, reg, cfg.Transforms, cfg.AllowUnknownVariables); err != nil {
		return tryConfigError(stderr, err)
	}
	var exist []string
	if *topics != "" {
		exist = strings.Split(*topics, ",")
	}
	lines, code := tryChain(reg, cfg, recs, exist, log, stderr)
	if lines == nil {
		return code
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			fmt.Fprintln(stderr, "processor: writing the results: "+err.Error())
			return exitRuntime
		}
	}
	return code
}

// tryConfigError prints one line for a configuration mistake to stderr
// and returns 2.
func tryConfigError(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "processor: configuration error: "+oneLine(err.Error()))
	return exitConfig
}

// loadTryConfig reads the PROCESSOR_* environment as config.Load does,
// with the settings try does not need (brokers, group, input and output
// topics) defaulted when unset, and validates it.
func loadTryConfig() (*config.Config, error) {
	c, err := config.Read(config.Env(config.EnvName))
	if err != nil {
		return nil, err
	}
	if len(c.Brokers) == 0 {
		c.Brokers = []string{tryBrokers}
	}
	c.EmbeddedBroker = false // nothing is started
	// The samples are what the chain sees (JSON for jq), so the key and
	// value formats do not apply; a chain that reads Avro decoded reads
	// its JSON.
	c.DropSchemas()
	if c.Group == "" {
		c.Group = tryGroup
	}
	if len(c.InputTopics) == 0 {
		c.InputTopics = []string{tryInputTopic}
	}
	if c.OutputTopic == "" {
		c.OutputTopic = tryOutputTopic
	}
	if c.TransactionalID == "" {
		c.TransactionalID = c.Group + "-try"
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// tryChain builds the chain of cfg and runs the loop over recs. It returns
// one line per input and the exit code, or no lines and the exit code
// when the chain or the loop could not be built.
func tryChain(reg *transform.Registry, cfg *config.Config, recs []*kgo.Record, topics []string, log *slog.Logger,
	stderr io.Writer) ([]tryLine, int) {
	chains, err := buildChains(reg, cfg, 1)
	defer func() {
		for _, c := range chains {
			if cerr := c.Close(); cerr != nil {
				log.Warn("closing transforms", "err", cerr.Error())
			}
		}
	}()
	if err != nil {
		return nil, tryConfigError(stderr, err)
	}
	required := requiredTopics(cfg, chains[0])
	res, runErr, err := runTryLoop(cfg, chains[0], required, recs, topics, log)
	if err != nil {
		return nil, tryConfigError(stderr, pipelineError(cfg, err))
	}
	var recErr *pipeline.RecordError
	var missing *pipeline.MissingTopicsError
	if errors.As(runErr, &missing) {
		value := missing.Topics[0]
		return nil, tryConfigError(stderr, &settings.Error{Var: required[value], Value: value,
			Want: settings.Say("a topic in -topics (it is not there)")})
	}
	if runErr != nil && !errors.As(runErr, &recErr) {
		fmt.Fprintln(stderr, "processor: stopping: "+oneLine(runErr.Error()))
		return nil, exitRuntime
	}
	return tryLines(recs, res, recErr)
}

// runTryLoop runs the loop over recs on a pipelinetest.Driver, one input
// per transaction so that each input's outputs are told apart, and
// returns what each input's transaction committed and the error Run
// returned; err is set when the loop could not be built. With topics,
// only those exist, and the output, dead-letter and fixed destinations
// (required) must be among them, as they must exist in the cluster.
func runTryLoop(cfg *config.Config, chain *transform.Chain, required map[string]string, recs []*kgo.Record, topics []string,
	log *slog.Logger) (res []pipelinetest.Result, runErr, err error) {
	opts := pipelineOptions(cfg, []*transform.Chain{chain}, required, log, Overrides{InjectAbort: func(uint64) bool { return false }})
	opts.MaxTxnBytes, opts.ProgressInterval = 0, 0
	if topics == nil {
		opts.RequireTopics = nil
	}
	dopts := []pipelinetest.Option{pipelinetest.WithOptions(opts)}
	for topic, n := range tryInputs(cfg, recs) {
		dopts = append(dopts, pipelinetest.WithInput(topic, n))
	}
	if topics != nil {
		exist := make([]string, len(topics))
		for i, t := range topics {
			exist[i] = strings.TrimSpace(t)
		}
		dopts = append(dopts, pipelinetest.WithTopics(exist...))
	}
	d, err := pipelinetest.New(chain, dopts...)
	if err != nil {
		return nil, nil, err
	}
	res, runErr = d.Send(recs...)
	if cerr := d.Close(); runErr == nil {
		runErr = cerr
	}
	return res, runErr, nil
}

// tryInputs are the input topics and their partitions: the configured
// input topics and those the samples name, each with as many partitions
// as its samples need.
func tryInputs(cfg *config.Config, recs []*kgo.Record) map[string]int {
	in := map[string]int{}
	for _, t := range cfg.InputTopics {
		in[t] = 1
	}
	for _, r := range recs {
		in[r.Topic] = max(in[r.Topic], int(r.Partition)+1)
	}
	return in
}
