package binaries

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/record"
)

// runTool runs `processor args...` as inst (its variables and PATH as its
// whole environment) to its end and returns its stdout, stderr and exit
// code.
func runTool(t *testing.T, inst launch.Instance, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, itest.Binary(t), args...)
	c.Env = launch.Environ(launch.PathOnly, inst.Env()...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("processor %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// shownOffsets is the JSON of `processor offsets -json`.
type shownOffsets struct {
	Group      string
	Partitions []struct {
		Topic     string
		Partition int32
		Committed int64
		Lag       int64
		End       int64 `json:"log_end"`
	}
}

// TestBinaryOffsetsResetThenResume: `processor offsets` shows a new
// group with nothing committed; a reset to offset 6 is a dry run that
// moves nothing until -execute; a processor started then reads every
// partition from offset 6 on, each record once; a reset while it runs is
// refused with exit 1 and moves nothing.
func TestBinaryOffsetsResetThenResume(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("offsets-in"), N: 40, Keys: 4}
		out, group := itest.Unique("offsets-out"), itest.Unique("offsets-group")
		tg.NewTopics(t, 2, in.Topic, out)
		tg.Produce(t, in, 0, in.N)
		inst := tg.BinaryInstance(group, group+"-1", in.Topic, out)
		ends := tg.EndOffsets(t, in.Topic)

		stdout, stderr, code := runTool(t, inst, "offsets", "-json")
		var shown shownOffsets
		if err := json.Unmarshal([]byte(stdout), &shown); code != 0 || err != nil || len(shown.Partitions) != 2 {
			t.Fatalf("processor offsets -json: exit %d, %v\n%s%s", code, err, stdout, stderr)
		}
		for _, p := range shown.Partitions {
			if p.Committed != -1 || p.End != ends[p.Partition] || p.Lag != ends[p.Partition] {
				t.Errorf("shown %+v: want nothing committed, the log end %d and as much lag", p, ends[p.Partition])
			}
		}
		stdout, stderr, code = runTool(t, inst, "offsets", "reset", "-to", "6")
		if code != 0 || !strings.Contains(stdout, "dry run") {
			t.Fatalf("dry run: exit %d\n%s%s", code, stdout, stderr)
		}
		if got := tg.Committed(t, group, in.Topic); len(got) != 0 {
			t.Fatalf("the dry run committed %v", got)
		}
		if stdout, stderr, code = runTool(t, inst, "offsets", "reset", "-to", "6", "-execute"); code != 0 {
			t.Fatalf("reset: exit %d\n%s%s", code, stdout, stderr)
		}
		if got := tg.Committed(t, group, in.Topic); got[0] != 6 || got[1] != 6 {
			t.Fatalf("after the reset the group has %v, want 6 on both partitions", got)
		}

		p := itest.RunBinary(t, group+"-1", inst)
		tg.WaitCaughtUp(t, group, in.Topic)
		_, stderr, code = runTool(t, inst, "offsets", "reset", "-to", "earliest", "-execute")
		if code != 1 || !strings.Contains(stderr, "member") {
			t.Errorf("a reset under a running processor: exit %d, %q; want exit 1 naming the members", code, stderr)
		}
		p.Terminate(t)
		if got := tg.Committed(t, group, in.Topic); got[0] != ends[0] || got[1] != ends[1] {
			t.Errorf("the refused reset moved the offsets to %v", got)
		}
		seen := map[record.Source]int{}
		for _, r := range tg.ReadAll(t, out, true) {
			src, ok := record.Lineage(r.Headers)
			if !ok {
				t.Fatalf("an output without lineage: %v", r.Headers)
			}
			seen[src]++
		}
		for part, end := range ends {
			for o := int64(0); o < end; o++ {
				src := record.Source{Topic: in.Topic, Partition: part, Offset: o}
				if want := map[bool]int{true: 1, false: 0}[o >= 6]; seen[src] != want {
					t.Errorf("input %s/%d/%d has %d outputs, want %d", in.Topic, part, o, seen[src], want)
				}
			}
		}
	})
}

// TestBinaryOffsetsResetPostgres: with PROCESSOR_SINK=postgres, a reset
// writes the offsets table (and the group's copy); a processor started
// then writes the rows of the inputs from the new offsets on, each once;
// a reset under it is refused with exit 1 and moves no row.
func TestBinaryOffsetsResetPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("offsets-pg-in"), N: 40, Keys: 4}
		group := itest.Unique("offsets-pg-group")
		tg.NewTopics(t, 2, in.Topic)
		tg.Produce(t, in, 0, in.N)
		ends := tg.EndOffsets(t, in.Topic)
		inst := tg.BinaryInstance(group, group+"-1", in.Topic, "")
		inst.Sink = "postgres"
		inst.Settings = map[string]string{"PROCESSOR_POSTGRES_URL": db.URL}
		if stdout, stderr, code := runTool(t, inst, "offsets", "reset", "-to", "6", "-execute"); code != 0 {
			t.Fatalf("reset: exit %d\n%s%s", code, stdout, stderr)
		}
		if got := itest.StoredTotal(t, db, group); got != 12 {
			t.Fatalf("after the reset the offsets table sums to %d, want 12", got)
		}
		if got := tg.Committed(t, group, in.Topic); got[0] != 6 || got[1] != 6 {
			t.Errorf("the group's copy is %v, want 6 and 6", got)
		}
		stdout, stderr, code := runTool(t, inst, "offsets", "-json")
		if code != 0 || strings.Count(stdout, `"stored_in": "postgres"`) != 2 {
			t.Errorf("processor offsets -json: exit %d, want both partitions stored in postgres\n%s%s", code, stdout, stderr)
		}
		p := itest.RunBinary(t, group+"-1", inst)
		want := int(ends[0] + ends[1])
		itest.WaitFor(t, 90*time.Second, "the stored offsets to reach the log ends", func() bool { return itest.StoredTotal(t, db, group) == want })
		if _, stderr, code := runTool(t, inst, "offsets", "reset", "-to", "earliest", "-execute"); code != 1 || !strings.Contains(stderr, "member") {
			t.Errorf("a reset under a running processor: exit %d, %q; want exit 1 naming the members", code, stderr)
		}
		p.Terminate(t)
		if got := itest.StoredTotal(t, db, group); got != want {
			t.Errorf("after the refused reset the offsets table sums to %d, want %d", got, want)
		}
		for part, end := range ends {
			rows := db.Count(t, `SELECT count(*) FROM processor_records WHERE src_topic = $1 AND src_partition = $2`, in.Topic, part)
			distinct := db.Count(t, `SELECT count(DISTINCT src_offset) FROM processor_records WHERE src_topic = $1 AND src_partition = $2 AND src_offset >= 6`, in.Topic, part)
			if rows != int(end-6) || distinct != rows {
				t.Errorf("partition %d: %d rows, %d distinct offsets from 6 on; want %d, each once", part, rows, distinct, end-6)
			}
		}
	})
}
