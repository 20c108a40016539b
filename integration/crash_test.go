package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

func (p *Proc) CommittedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstCommit
}

func (p *Proc) Kill(t *testing.T) {
	t.Helper()
	_ = p.Process.Kill()
	select {
	case <-p.Done:
	case <-time.After(BinaryKillTimeout):
		t.Fatalf("%s did not exit within %s of SIGKILL", p.Name, BinaryKillTimeout)
	}
}

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

// A processor SIGKILLed mid-transaction and restarted under the same
// transactional ID (and static member ID) fences its dead self, aborts the
// open transaction at once and resumes within 10s. One restarted under a
// new transactional ID cannot abort the dead transaction: it stays open,
// holding back the output's last stable offset (and, had it sent its
// offsets, the group's), until the transaction timeout. Either way the
// output is exactly once.
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	for _, sameID := range []bool{true, false} {
		name := "same-transactional-id"
		if !sameID {
			name = "new-transactional-id"
		}
		t.Run(name, func(t *testing.T) {
			ForEachTarget(t, func(t *testing.T, tg *Target) {
				in := Input{Topic: Unique("crash-in"), N: 30_000, Keys: 300}
				out, group := Unique("crash-out"), Unique("crash-group")
				tg.NewTopics(t, 6, in.Topic, out)
				tg.Produce(t, in, 0, in.N/3)

				// A restarted instance keeps its transactional ID and, with
				// it, its static member ID, so the group hands it back its
				// partitions without waiting out the session timeout.
				static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }
				p1 := tg.StartBinary(t, group, group+"-1", in.Topic, out, static)
				WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
				// Keep input arriving so the kill lands inside a transaction.
				fed := make(chan struct{})
				go func() {
					defer close(fed)
					for i := in.N / 3; i < in.N; i += in.N / 30 {
						if t.Context().Err() != nil || !tg.Produce(t, in, i, min(i+in.N/30, in.N)) {
							return
						}
						time.Sleep(30 * time.Millisecond)
					}
				}()
				time.Sleep(300 * time.Millisecond)
				p1.Kill(t)

				id := group + "-1"
				if !sameID {
					id = group + "-2"
				}
				restarted := time.Now()
				p2 := tg.StartBinary(t, group, id, in.Topic, out, static)
				WaitClosed(t, fed, FeedTimeout, "the input feeder to write the last two thirds of the input")
				tg.WaitCaughtUp(t, group, in.Topic)
				WaitFor(t, 5*time.Second, "a progress line showing a commit", func() bool { return !p2.CommittedAt().IsZero() })
				recovery := p2.CommittedAt().Sub(restarted)
				t.Logf("%s: restart to first commit: %s", tg.Name, recovery.Round(10*time.Millisecond))
				p2.Terminate(t)
				CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
				if sameID && recovery > 10*time.Second {
					t.Errorf("recovery under the same transactional ID took %s, want under 10s", recovery)
				}

			})
		})
	}
}

// Dead letters are exactly-once too: a processor with PROCESSOR_ON_ERROR=dlq
// and a jq transform, fed JSON with malformed records among it, is
// SIGKILLed mid-run and restarted; afterwards every input is exactly once
// in the output or the dead-letter topic (eoscheck, one-to-one over both).
func TestDeadLettersUnderCrash(t *testing.T) {
	t.Parallel()
	ForEachTarget(t, func(t *testing.T, tg *Target) {
		in, out, dlq, group := Unique("dlqcrash-in"), Unique("dlqcrash-out"), Unique("dlqcrash-dlq"), Unique("dlqcrash-group")
		tg.NewTopics(t, 3, in, out, dlq)
		const n = 20_000
		// write reports whether records [from, to) were all acknowledged,
		// within ProduceTimeout; it may be called from any goroutine.
		write := func(from, to int) bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.DefaultProduceTopic(in))
			if err != nil {
				t.Error(err)
				return false
			}
			defer cl.Close()
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				v := `{"seq":` + strconv.Itoa(i) + `}`
				if i%50 == 7 {
					v = `{"seq":` // malformed
				}
				recs = append(recs, &kgo.Record{Key: []byte("k" + strconv.Itoa(i%40)), Value: []byte(v)})
			}
			ctx, cancel := context.WithTimeout(t.Context(), ProduceTimeout)
			defer cancel()
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				if t.Context().Err() == nil { // else the test has ended: nobody to tell
					t.Errorf("writing records [%d, %d) to %s (deadline %s): %v", from, to, in, ProduceTimeout, err)
				}
				return false
			}
			return true
		}
		write(0, n/2)
		env := func(inst *launch.Instance) {
			inst.InstanceID = group + "-1"
			inst.Transforms, inst.Settings = []string{"jq"}, map[string]string{"PROCESSOR_JQ_EXPR": "."}
			inst.OnError, inst.DLQTopic = "dlq", dlq
		}
		p1 := tg.StartBinary(t, group, group+"-1", in, out, env)
		WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			for i := n / 2; i < n; i += n / 20 {
				if t.Context().Err() != nil || !write(i, i+n/20) {
					return
				}
				time.Sleep(30 * time.Millisecond)
			}
		}()
		time.Sleep(200 * time.Millisecond)
		p1.Kill(t)
		p2 := tg.StartBinary(t, group, group+"-1", in, out, env)
		WaitClosed(t, fed, FeedTimeout, "the input feeder to write the second half of the input")
		tg.WaitCaughtUp(t, group, in)
		p2.Terminate(t)
		tg.Audit(t, group, []string{in}, []string{out, dlq})
		if dead := tg.ReadAll(t, dlq, true); len(dead) != n/50 {
			t.Errorf("%d dead letters, want %d", len(dead), n/50)
		}
	})
}
