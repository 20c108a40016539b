package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// The flags of the commands that work on a running processor's cluster
// (processor offsets, processor replay): read alike, with the same usage
// and exit codes. They stop on a signal (interrupt.Context) and reach the
// brokers through toolBrokers and kafkaConn.

// newFlags returns the flag set of command name: it returns its errors
// rather than printing them, and the command prints its own usage
// (parseFlags).
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args with fs, made by newFlags, then runs check (when
// not nil) on the values read. -h or -help prints usage to stderr and
// returns exitOK and false; a bad flag, an argument after the flags or
// check's error prints "processor <name>: <error>" and usage, and returns
// exitConfig and false. ok is true when the command may go on.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stderr io.Writer, check func() error) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stderr, usage)
		return exitOK, false
	case err == nil && fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	case err == nil && check != nil:
		err = check()
	}
	if err != nil {
		fmt.Fprintf(stderr, "processor %s: %v\n%s\n", fs.Name(), err, usage)
		return exitConfig, false
	}
	return exitOK, true
}
