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

// proc is a processor binary running against a target.
type proc struct {
	name     string
	process  *launch.Process
	logs     *syncBuffer
	done     chan struct{}
	err      error
	timedOut bool // killed at binaryRunTimeout; set before done is closed

	mu          sync.Mutex
	firstCommit time.Time // first progress line with committed > 0
}

// startBinary runs cmd/processor against tg as the test suite's standard
// instance with the given group, transactional ID and topics (see
// binaryInstance), changed by set.
func (tg *target) startBinary(t *testing.T, group, txnID, in, out string, set ...func(*launch.Instance)) *proc {
	t.Helper()
	inst := tg.binaryInstance(group, txnID, in, out)
	for _, f := range set {
		f(&inst)
	}
	return runBinary(t, txnID, inst)
}

// binaryInstance is the processor instance the tests run against tg:
// group, transactional ID and topics as given, a free HTTP port, text
// logs, progress lines every 100ms, commits every 500ms and timeouts short
// enough for a test.
func (tg *target) binaryInstance(group, txnID, in, out string) launch.Instance {
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

// runBinary runs cmd/processor as inst, with inst's variables and PATH as
// its whole environment; its log is kept, and shown if the test fails. It
// is killed when the test ends, or binaryRunTimeout after start, which
// fails the test.
func runBinary(t *testing.T, name string, inst launch.Instance) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), binaryRunTimeout)
	c := inst.Command(binary(t), launch.PathOnly)
	c.WaitDelay = 10 * time.Second // its end is seen even if something still holds its stderr
	pr, pw := io.Pipe()
	c.Output = pw
	lp, err := launch.Start(ctx, c) // killed at the deadline
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &proc{name: name, process: lp, logs: &syncBuffer{}, done: make(chan struct{})}
	scanned := make(chan struct{}) // every line is in p.logs
	go func() {
		defer close(scanned)
		defer io.Copy(io.Discard, pr) // a line past the scanner's limit must not block the process's writes
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = p.logs.Write([]byte(line + "\n"))
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
		p.err = lp.Wait()
		if ctx.Err() != nil {
			p.timedOut = true
			p.err = fmt.Errorf("killed %s after start, at the deadline of a test's binary: %w", binaryRunTimeout, p.err)
		}
		cancel()
		pw.Close()
		<-scanned // the last lines (a configuration error, say) are in the log before done
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = lp.Kill()
		select {
		case <-p.done:
			if p.timedOut {
				t.Errorf("%s was still running %s after start and was killed then: %v", name, binaryRunTimeout, p.err)
			}
		case <-time.After(binaryKillTimeout):
			t.Errorf("%s did not exit within %s of SIGKILL", name, binaryKillTimeout)
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, p.logs.String())
		}
	})
	return p
}

func (p *proc) committedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstCommit
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = p.process.Kill()
	select {
	case <-p.done:
	case <-time.After(binaryKillTimeout):
		t.Fatalf("%s did not exit within %s of SIGKILL", p.name, binaryKillTimeout)
	}
}

func (p *proc) terminate(t *testing.T) {
	t.Helper()
	_ = p.process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
	if p.err != nil {
		t.Errorf("exit after SIGTERM: %v", p.err)
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
			forEachTarget(t, func(t *testing.T, tg *target) {
				in := input{topic: unique("crash-in"), n: 30_000, keys: 300}
				out, group := unique("crash-out"), unique("crash-group")
				tg.createTopics(t, 6, in.topic, out)
				tg.produce(t, in, 0, in.n/3)

				// A restarted instance keeps its transactional ID and, with
				// it, its static member ID, so the group hands it back its
				// partitions without waiting out the session timeout.
				static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }
				p1 := tg.startBinary(t, group, group+"-1", in.topic, out, static)
				waitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.committedAt().IsZero() })
				// Keep input arriving so the kill lands inside a transaction.
				fed := make(chan struct{})
				go func() {
					defer close(fed)
					for i := in.n / 3; i < in.n; i += in.n / 30 {
						if t.Context().Err() != nil || !tg.produce(t, in, i, min(i+in.n/30, in.n)) {
							return
						}
						time.Sleep(30 * time.Millisecond)
					}
				}()
				time.Sleep(300 * time.Millisecond)
				p1.kill(t)

				id := group + "-1"
				if !sameID {
					id = group + "-2"
				}
				restarted := time.Now()
				p2 := tg.startBinary(t, group, id, in.topic, out, static)
				waitClosed(t, fed, feedTimeout, "the input feeder to write the last two thirds of the input")
				tg.waitCaughtUp(t, group, in.topic)
				waitFor(t, 5*time.Second, "a progress line showing a commit", func() bool { return !p2.committedAt().IsZero() })
				recovery := p2.committedAt().Sub(restarted)
				t.Logf("%s: restart to first commit: %s", tg.Name, recovery.Round(10*time.Millisecond))
				p2.terminate(t)
				checkExactlyOnce(t, in, tg.readAll(t, out, true))
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
	forEachTarget(t, func(t *testing.T, tg *target) {
		in, out, dlq, group := unique("dlqcrash-in"), unique("dlqcrash-out"), unique("dlqcrash-dlq"), unique("dlqcrash-group")
		tg.createTopics(t, 3, in, out, dlq)
		const n = 20_000
		// write reports whether records [from, to) were all acknowledged,
		// within produceTimeout; it may be called from any goroutine.
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
			ctx, cancel := context.WithTimeout(t.Context(), produceTimeout)
			defer cancel()
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				if t.Context().Err() == nil { // else the test has ended: nobody to tell
					t.Errorf("writing records [%d, %d) to %s (deadline %s): %v", from, to, in, produceTimeout, err)
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
		p1 := tg.startBinary(t, group, group+"-1", in, out, env)
		waitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.committedAt().IsZero() })
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
		p1.kill(t)
		p2 := tg.startBinary(t, group, group+"-1", in, out, env)
		waitClosed(t, fed, feedTimeout, "the input feeder to write the second half of the input")
		tg.waitCaughtUp(t, group, in)
		p2.terminate(t)
		tg.audit(t, group, []string{in}, []string{out, dlq})
		if dead := tg.readAll(t, dlq, true); len(dead) != n/50 {
			t.Errorf("%d dead letters, want %d", len(dead), n/50)
		}
	})
}
