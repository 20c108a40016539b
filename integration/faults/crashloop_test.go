package faults

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/record"
)

// A record that kills the process is dead-lettered on its return past
// PROCESSOR_MAX_CRASH_ATTEMPTS, instead of a crash loop. The processor
// binary, with PROCESSOR_TEST_CRASH_ON, SIGKILLs itself when the marked
// record starts through the chain; it is restarted after every death.
// With the limit at 2: the first process dies on the record after
// commits of its own (not counted: only an assignment's first attempt
// is), the next two die on the record's batch first thing (counted), the
// fourth runs the suspect records one per transaction and dies on the
// record alone, the fifth dead-letters it without running it and goes
// on. So exactly four processes die, the culprit is in the dead-letter
// topic once with the headers that say why (3 deaths counted), and
// eoscheck finds every other input exactly once in the output.
//
// At least once it goes the same way, the batches' plain offset commits
// carrying the count; eoscheck then allows inputs written twice (the
// deaths repeat batches), and wants none lost.
func TestCrashLoopDeadLettered(t *testing.T) {
	t.Parallel()
	for _, guarantee := range []string{"exactly_once", "at_least_once"} {
		t.Run(guarantee, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) { crashLoop(t, tg, guarantee) })
		})
	}
}

func crashLoop(t *testing.T, tg *itest.Target, guarantee string) {
	in := itest.Input{Topic: itest.Unique("crashloop-in"), N: 660, Keys: 30}
	out, dlq, group := itest.Unique("crashloop-out"), itest.Unique("crashloop-dlq"), itest.Unique("crashloop-group")
	tg.NewTopics(t, 3, in.Topic, out, dlq)
	const marker = "KILL-THE-PROCESS"
	const culprit = 630
	env := func(inst *launch.Instance) {
		inst.InstanceID = group + "-1" // a restart takes its partitions back at once
		inst.OnError, inst.DLQTopic, inst.Guarantee = "dlq", dlq, guarantee
		inst.Settings = map[string]string{"PROCESSOR_MAX_CRASH_ATTEMPTS": "2", "PROCESSOR_TEST_CRASH_ON": marker}
	}

	// Some committed progress first, so that the records the
	// processes die on are the tail of the input.
	tg.Produce(t, in, 0, 600)
	p := tg.StartBinary(t, group, group+"-1", in.Topic, out, env)
	tg.WaitCaughtUp(t, group, in.Topic)
	writeMarked(t, tg, in, 600, in.N, culprit, marker)

	deaths, began := 0, time.Now()
	for run := 1; ; run++ {
		if died := waitDeathOrCaughtUp(t, tg, p, group, in.Topic); !died {
			break
		}
		deaths++
		if !strings.Contains(p.Logs.String(), "killing the process on a record") {
			t.Fatalf("process %d died, but not on the marked record", run)
		}
		if alone := strings.Contains(p.Logs.String(), "running them one at a time"); alone != (deaths == 4) {
			t.Errorf("process %d (death %d) ran records one at a time: %t", run, deaths, alone)
		}
		if deaths > 6 {
			t.Fatalf("%d processes died on the marked record: a crash loop", deaths)
		}
		p = tg.StartBinary(t, group, group+"-1", in.Topic, out, env)
	}
	if !strings.Contains(p.Logs.String(), "a record killed the process when it ran alone") {
		t.Errorf("the process that went on did not say it found the culprit")
	}
	t.Logf("%s: %d deaths, from writing the marked record to caught up: %s", tg.Name, deaths, time.Since(began).Round(100*time.Millisecond))
	p.Terminate(t)
	if deaths != 4 {
		t.Errorf("%d processes died, want 4: one after commits, two on the record's batch, one on the record alone", deaths)
	}
	auditCrashLoop(t, tg, group, []string{in.Topic}, []string{out, dlq}, guarantee == "at_least_once")
	checkCrashDeadLetter(t, tg.ReadAll(t, dlq, true), marker)
}

// auditCrashLoop is tg.audit, allowing inputs written more than once when
// atLeastOnce.
func auditCrashLoop(t *testing.T, tg *itest.Target, group string, inputs, outputs []string, atLeastOnce bool) {
	t.Helper()
	rep := tg.AuditWith(t, check.Source{Inputs: inputs, Outputs: outputs, Group: group},
		check.Options{OneToOne: true, ExpectAll: true, AtLeastOnce: atLeastOnce})
	t.Logf("%s: eoscheck: %d inputs written more than once", tg.Name, rep.Repeated)
}

// writeMarked writes in's records [from, to), record culprit's value
// holding marker.
func writeMarked(t *testing.T, tg *itest.Target, in itest.Input, from, to, culprit int, marker string) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		r := in.Record(i)
		if i == culprit {
			r.Value = append(r.Value, " "+marker...)
		}
		recs = append(recs, r)
	}
	cl, err := kgo.NewClient(tg.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), itest.ProduceTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("writing records [%d, %d): %v", from, to, err)
	}
}

// waitDeathOrCaughtUp waits until p dies (true) or the group has
// committed all of topic with p running (false).
func waitDeathOrCaughtUp(t *testing.T, tg *itest.Target, p *itest.Proc, group, topic string) bool {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-p.Done:
			return true
		case <-time.After(100 * time.Millisecond):
		}
		if tg.IsCaughtUp(t, group, topic) {
			select {
			case <-p.Done:
				return true
			default:
				return false
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s neither died nor caught up within 2 minutes", p.Name)
		}
	}
}

// checkCrashDeadLetter checks that dead holds the marked record once,
// failed as one the process died on three times.
func checkCrashDeadLetter(t *testing.T, dead []*kgo.Record, marker string) {
	t.Helper()
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want the marked record once", len(dead))
	}
	d := dead[0]
	if !bytes.Contains(d.Value, []byte(marker)) {
		t.Errorf("the dead letter is %q, not the marked record", d.Value)
	}
	h := map[string]string{}
	for _, x := range d.Headers {
		h[x.Key] = string(x.Value)
	}
	if h[record.HeaderErrorTransform] != "crash" || h[record.HeaderErrorAttempts] != strconv.Itoa(3) ||
		!strings.Contains(h[record.HeaderError], "died 3 times") || !strings.Contains(h[record.HeaderError], "PROCESSOR_MAX_CRASH_ATTEMPTS") {
		t.Errorf("dead letter headers %q, want transform crash, 3 attempts and an error that says so", h)
	}
}
