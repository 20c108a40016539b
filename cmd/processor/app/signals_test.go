package app

import (
	"syscall"
	"testing"
	"time"
)

// The first SIGTERM cancels the run's context; a second one asks to give up
// the shutdown. Neither kills the process: Main decides the exit code.
func TestHandleSignals(t *testing.T) {
	ctx, again, stop := handleSignals()
	defer stop()
	select {
	case <-ctx.Done():
		t.Fatal("the context ended before any signal")
	case <-again:
		t.Fatal("a second signal was reported before any signal")
	default:
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first SIGTERM did not end the context")
	}
	select {
	case <-again:
		t.Fatal("the first SIGTERM counted as a second one")
	case <-time.After(100 * time.Millisecond):
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-again:
	case <-time.After(5 * time.Second):
		t.Fatal("the second SIGTERM was not reported")
	}
}

// Stopping before any signal ends the watcher without reporting anything.
func TestHandleSignalsStop(t *testing.T) {
	ctx, again, stop := handleSignals()
	stop()
	stop() // twice is fine
	select {
	case <-again:
		t.Fatal("stop reported a second signal")
	case <-time.After(100 * time.Millisecond):
	}
	if ctx.Err() == nil {
		t.Error("stop left the context running")
	}
}
