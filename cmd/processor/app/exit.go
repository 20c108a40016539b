package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// exitCode logs how the run ended and returns the exit code.
func exitCode(err error, cfg *config.Config, required map[string]string, p *pipeline.Pipeline, log *slog.Logger) int {
	var fenced *txn.FencedError
	var missing *pipeline.MissingTopicsError
	var recErr *pipeline.RecordError
	var access *txn.AccessError
	var persistent *sink.PersistentError
	var timeout *txn.TimeoutError
	switch {
	case err == nil:
		s := p.Stats()
		log.Info("processor stopped cleanly", "records_consumed", s.Consumed, "records_produced", s.Produced,
			"transactions_committed", s.Commits, "transactions_aborted", s.Aborts)
		return exitOK
	case errors.As(err, &missing) && missing.Deleted:
		var named []string
		for _, t := range missing.Topics {
			named = append(named, fmt.Sprintf("%q (%s)", t, required[t]))
		}
		what := "the topic " + named[0] + " does not exist any more: it was deleted while the processor ran, and every transaction would abort; create it again"
		if len(named) > 1 {
			what = "the topics " + strings.Join(named, ", ") + " do not exist any more: they were deleted while the processor ran, and every transaction would abort; create them again"
		}
		log.Error("stopping: " + what)
	case errors.As(err, &missing):
		value := missing.Topics[0]
		return configError(&settings.Error{Var: required[value], Value: value,
			Want: settings.Say("a topic that exists in the cluster (it does not; create it first, e.g. kafka-topics.sh --create --topic " + value + ")")})
	case errors.As(err, &fenced):
		log.Error("stopping: " + fenced.Hint("give every instance its own "+config.EnvName("TRANSACTIONAL_ID")))
	case errors.As(err, &persistent):
		log.Error("stopping: " + persistent.Line(func(setting string) string { return sinkVar(cfg.Sink, setting) }))
	case errors.As(err, &access):
		log.Error("stopping: " + accessMessage(access, cfg))
	case errors.As(err, &recErr):
		msg := "stopping: a record failed and PROCESSOR_ON_ERROR=fail; nothing from this record on was committed, and a restart meets the same record again (set PROCESSOR_ON_ERROR=dlq to set it aside)"
		if cfg.OnError != "fail" {
			msg = "stopping: a record failed and its dead letter cannot be written even without its value; nothing from this record on was committed, and a restart meets the same record again (check the dead-letter topic and its max.message.bytes)"
		}
		log.Error(msg, "topic", recErr.Source.Topic, "partition", recErr.Source.Partition, "offset", recErr.Source.Offset, "err", recErr.Err.Error())
	case errors.As(err, &timeout):
		return configError(&settings.Error{Var: config.EnvName("TRANSACTION_TIMEOUT"), Value: cfg.TransactionTimeout.String(),
			Want: settings.Say(fmt.Sprintf("a duration of at most the brokers' transaction.max.timeout.ms (%s), below %s; or a higher transaction.max.timeout.ms on every broker",
				timeout.Max, config.EnvName("SESSION_TIMEOUT")))})
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return configError(&settings.Error{Var: config.EnvName("TRANSACTION_TIMEOUT"), Value: cfg.TransactionTimeout.String(),
			Want: settings.Say("a duration the broker accepts: at most its transaction.max.timeout.ms (15m by default)")})
	default:
		log.Error("stopping: " + err.Error())
	}
	return exitRuntime
}

// pipelineError is the error of the pipeline's check (pipeline.Check,
// pipeline.New) as the configuration error it is, naming the variable to
// change; other errors are returned as they are.
func pipelineError(cfg *config.Config, err error) error {
	var budget *pipeline.BudgetError
	var dest *pipeline.DestinationError
	var st *pipeline.StateError
	switch {
	case errors.As(err, &budget):
		return budgetError(cfg, budget)
	case errors.As(err, &st):
		return stateError(cfg, st)
	case errors.As(err, &dest):
		why := "a topic that is not also in PROCESSOR_INPUT_TOPICS (the processor would consume its own output forever)"
		if dest.DeadLetters {
			why = "a topic other than PROCESSOR_DLQ_TOPIC (outputs would be mixed into the dead letters)"
		}
		d := dest.Destination
		return &settings.Error{Var: PluginVar(d.Entry.Plugin(), d.Setting), Value: d.Topic, Want: settings.Say(why)}
	}
	return err
}

// budgetError names the setting to change when one record's retries
// cannot fit the transaction's time budget.
func budgetError(cfg *config.Config, e *pipeline.BudgetError) error {
	fits := fmt.Sprintf("a value with which one record's %d attempts fit four fifths of PROCESSOR_TRANSACTION_TIMEOUT (%s): %s",
		e.Attempts, e.Budget, e.Error())
	switch {
	case e.Entry != (transform.Entry{}):
		return &settings.Error{Var: PluginVar(e.Entry.Plugin(), "TIMEOUT"), Value: e.PerAttempt.String(), Want: settings.Say(fits)}
	case e.PerAttempt > 0:
		return &settings.Error{Var: config.EnvName("TRANSFORM_TIMEOUT"), Value: cfg.TransformTimeout.String(), Want: settings.Say(fits)}
	}
	return &settings.Error{Var: config.EnvName("MAX_RETRIES"), Value: strconv.Itoa(cfg.MaxRetries), Want: settings.Say(fits)}
}

// configError prints one line for a configuration mistake and returns 2.
func configError(err error) int {
	fmt.Fprintln(os.Stderr, "processor: configuration error: "+oneLine(err.Error()))
	return exitConfig
}

// oneLine joins the lines of a message (a driver's error may list one
// line per address it tried) with "; ".
func oneLine(msg string) string {
	lines := strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' })
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "; ")
}
