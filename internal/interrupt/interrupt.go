// Package interrupt is how the project's commands (the processor and its
// subcommands, loadgen, devbroker, eoscheck, the benchmarks) learn that
// they are asked to stop: the first SIGINT (Ctrl-C, os.Interrupt) or
// SIGTERM (a container's stop) ends a context, one set of signals for
// all.
package interrupt

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Signals returns the signals that ask a command to stop: SIGINT and
// SIGTERM. A command that also reacts to a second one (the processor
// gives up finishing its open transaction) listens for these.
func Signals() []os.Signal { return []os.Signal{os.Interrupt, syscall.SIGTERM} }

// Context returns a context that the first of Signals ends, and the
// function that stops listening (after which the signals act as by
// default again: the process ends).
func Context() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), Signals()...)
}
