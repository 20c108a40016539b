package itest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/launch"
)

// Proc is a processor binary running against a target.
type Proc struct {
	Name     string
	Process  *launch.Process
	Logs     *SyncBuffer
	Done     chan struct{}
	Err      error
	timedOut bool // killed at binaryRunTimeout; set before done is closed

	mu          sync.Mutex
	firstCommit time.Time // first progress line with committed > 0
}

// StartBinary runs cmd/processor against tg as the test suite's standard
// instance with the given group, transactional ID and topics (see
// BinaryInstance), changed by set.
func (tg *Target) StartBinary(t *testing.T, group, txnID, in, out string, set ...func(*launch.Instance)) *Proc {
	t.Helper()
	inst := tg.BinaryInstance(group, txnID, in, out)
	for _, f := range set {
		f(&inst)
	}
	return RunBinary(t, txnID, inst)
}

// BinaryInstance is the processor instance the tests run against tg:
// group, transactional ID and topics as given, a free HTTP port, text
// logs, progress lines every 100ms, commits every 500ms and timeouts short
// enough for a test.
func (tg *Target) BinaryInstance(group, txnID, in, out string) launch.Instance {
	return launch.Instance{
		Brokers:            tg.Brokers,
		Group:              group,
		InputTopics:        []string{in},
		OutputTopic:        out,
		TransactionalID:    txnID,
		HTTPAddr:           "127.0.0.1:0",
		SessionTimeout:     10 * time.Second,
		TransactionTimeout: 8 * time.Second,
		CommitInterval:     500 * time.Millisecond,
		ProgressInterval:   100 * time.Millisecond,
		LogFormat:          "text",
	}
}

// RunBinary runs cmd/processor as inst, with inst's variables and PATH as
// its whole environment; its log is kept, and shown if the test fails. It
// is killed when the test ends, or binaryRunTimeout after start, which
// fails the test.
func RunBinary(t *testing.T, name string, inst launch.Instance) *Proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), binaryRunTimeout)
	c := inst.Command(Binary(t), launch.PathOnly)
	c.WaitDelay = 10 * time.Second // its end is seen even if something still holds its stderr
	pr, pw := io.Pipe()
	c.Output = pw
	lp, err := launch.Start(ctx, c) // killed at the deadline
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &Proc{Name: name, Process: lp, Logs: &SyncBuffer{}, Done: make(chan struct{})}
	scanned := make(chan struct{}) // every line is in p.logs
	go func() {
		defer close(scanned)
		defer io.Copy(io.Discard, pr) // a line past the scanner's limit must not block the process's writes
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = p.Logs.Write([]byte(line + "\n"))
			if strings.Contains(line, "msg=progress") && !strings.Contains(line, " committed=0 ") {
				p.mu.Lock()
				if p.firstCommit.IsZero() {
					p.firstCommit = time.Now()
				}
				p.mu.Unlock()
			}
		}
	}()
	go func() {
		p.Err = lp.Wait()
		if ctx.Err() != nil {
			p.timedOut = true
			p.Err = fmt.Errorf("killed %s after start, at the deadline of a test's binary: %w", binaryRunTimeout, p.Err)
		}
		cancel()
		pw.Close()
		<-scanned // the last lines (a configuration error, say) are in the log before done
		close(p.Done)
	}()
	t.Cleanup(func() {
		_ = lp.Kill()
		select {
		case <-p.Done:
			if p.timedOut {
				t.Errorf("%s was still running %s after start and was killed then: %v", name, binaryRunTimeout, p.Err)
			}
		case <-time.After(BinaryKillTimeout):
			t.Errorf("%s did not exit within %s of SIGKILL", name, BinaryKillTimeout)
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, p.Logs.String())
		}
	})
	return p
}

// CommittedAt is when p first reported a commit (the zero time if not
// yet): a test kills it only after some progress.
func (p *Proc) CommittedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstCommit
}

// Kill sends SIGKILL and waits for p to exit, failing the test after
// BinaryKillTimeout.
func (p *Proc) Kill(t *testing.T) {
	t.Helper()
	_ = p.Process.Kill()
	select {
	case <-p.Done:
	case <-time.After(BinaryKillTimeout):
		t.Fatalf("%s did not exit within %s of SIGKILL", p.Name, BinaryKillTimeout)
	}
}

// Terminate sends SIGTERM, a clean stop, and waits for p to exit; an
// exit with an error fails the test.
func (p *Proc) Terminate(t *testing.T) {
	t.Helper()
	_ = p.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
	if p.Err != nil {
		t.Errorf("exit after SIGTERM: %v", p.Err)
	}
}
