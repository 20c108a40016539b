package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Command is a program to start, with its environment and where its
// output goes.
type Command struct {
	Path string   // the binary
	Args []string // its arguments
	// Env is the whole environment (see Environ); nil means the caller's,
	// as with os/exec.
	Env []string

	// Log is a file that receives the process's stderr, and with Stdout
	// its stdout too. It is opened for appending, created if missing, so
	// that the lines of a restarted instance follow its earlier runs';
	// Truncate empties it first. The file is the process's own
	// descriptor: nothing of the caller sits between the process and its
	// log, so a slow reader of the log can never block it.
	Log      string
	Truncate bool
	Stdout   bool
	// Output receives the same as Log would when Log is empty (a pipe
	// that a test scans, say); with neither, output is discarded.
	Output io.Writer
	// WaitDelay bounds how long the process's end waits for Output to
	// drain once the process has exited (exec.Cmd.WaitDelay); 0: no
	// bound.
	WaitDelay time.Duration

	// OwnGroup starts the process in a process group of its own, so that
	// a terminal's signals (Ctrl-C) reach it only through the caller.
	OwnGroup bool
}

// Command returns the command that starts the processor binary bin as
// this instance, its environment base with the instance's variables on
// top. Set its Log or Output before Start.
func (in Instance) Command(bin string, base Base) Command {
	return Command{Path: bin, Env: Environ(base, in.Env()...)}
}

// Process is a started command. Its end is watched from the start: Done
// is closed once it has exited and its log is closed.
type Process struct {
	cmd  *exec.Cmd
	log  string
	from int64
	done chan struct{}
	err  error
}

// Start starts c. When ctx ends before the process does, the process is
// killed (exec.CommandContext); pass a context that does not end to stop
// it only by Signal, Stop or Kill. A failure to open the log or to start
// the binary is returned, and nothing is left running.
func Start(ctx context.Context, c Command) (*Process, error) {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = c.Env
	cmd.WaitDelay = c.WaitDelay
	if c.OwnGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p := &Process{cmd: cmd, log: c.Log, done: make(chan struct{})}
	var logf *os.File
	var out io.Writer = c.Output
	if c.Log != "" {
		flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
		if c.Truncate {
			flags |= os.O_TRUNC
		}
		f, err := os.OpenFile(c.Log, flags, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening the log of %s: %w", c.Path, err)
		}
		if p.from, err = f.Seek(0, io.SeekEnd); err != nil {
			f.Close()
			return nil, fmt.Errorf("opening the log of %s: %w", c.Path, err)
		}
		logf, out = f, f
	}
	if out != nil {
		cmd.Stderr = out
		if c.Stdout {
			cmd.Stdout = out
		}
	}
	if err := cmd.Start(); err != nil {
		if logf != nil {
			logf.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", c.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Log is the path of the process's log file; empty without one.
func (p *Process) Log() string { return p.log }

// LogFrom is where in the log file this run's lines begin: the file's
// size when the process started.
func (p *Process) LogFrom() int64 { return p.from }

// Signal sends sig to the process; after it has exited, it fails.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL to the process.
func (p *Process) Kill() error { return p.cmd.Process.Kill() }

// Done is closed once the process has exited (and its log is closed).
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended, once Done is closed: nil after exit code
// 0, else an *exec.ExitError (a signal too: SIGKILL when Start's context
// ended first). Before Done it is nil.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Wait waits for the process to exit and returns Err.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// ExitCode is the process's exit code once Done is closed; -1 while it
// runs or when a signal ended it.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
	default:
		return -1
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.cmd.ProcessState != nil {
		return p.cmd.ProcessState.ExitCode()
	}
	return -1
}

// Stop sends sig and waits up to within for the process to exit. It
// reports whether the process exited by itself in time; if it did not, it
// has been killed (SIGKILL) and has exited when Stop returns.
func (p *Process) Stop(sig os.Signal, within time.Duration) bool {
	_ = p.Signal(sig)
	select {
	case <-p.done:
		return true
	case <-time.After(within):
		_ = p.Kill()
		<-p.done
		return false
	}
}
