package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/record"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	ok := []string{"-input", "in", "-output", "out", "-group", "g"}
	for name, args := range map[string][]string{
		"no input":         {"-output", "out", "-group", "g"},
		"no output":        {"-input", "in", "-group", "g"},
		"no group":         {"-input", "in", "-output", "out"},
		"empty brokers":    append([]string{"-brokers", ","}, ok...),
		"bad duration":     append([]string{"-watch", "soon"}, ok...),
		"negative watch":   append([]string{"-watch", "-1s"}, ok...),
		"zero timeout":     append([]string{"-timeout", "0s"}, ok...),
		"unknown flag":     append([]string{"-nope"}, ok...),
		"positional":       append(ok, "extra"),
		"input is output":  {"-input", "a,b", "-output", "b", "-group", "g"},
		"dlq is output":    append([]string{"-dlq", "d,out"}, ok...),
		"dlq is input":     append([]string{"-dlq", "in"}, ok...),
		"skip, no poison":  append([]string{"-poison-skip"}, ok...),
		"replay, no dlq":   append([]string{"-replay-group", "g-replay"}, ok...),
		"unknown check":    append([]string{"-check", "aggregate,sums"}, ok...),
		"aggregate, alo":   append([]string{"-check", "aggregate", "-at-least-once"}, ok...),
		"aggregate, 1:n":   append([]string{"-check", "aggregate", "-one-to-one=false"}, ok...),
		"aggregate, pg":    {"-check", "aggregate", "-input", "in", "-group", "g", "-postgres-url", "postgres://u@127.0.0.1/db"},
		"group, no check":  append([]string{"-group-by", ".customer"}, ok...),
		"group not path":   append([]string{"-check", "aggregate", "-group-by", "customer"}, ok...),
		"group jq expr":    append([]string{"-check", "aggregate", "-group-by", ".customer | ascii_downcase"}, ok...),
		"group empty seg":  append([]string{"-check", "aggregate", "-group-by", ".order..customer"}, ok...),
		"windows, 1:1":     append([]string{"-check", "windows", "-window", "1m"}, ok...),
		"windows, no size": append([]string{"-check", "windows", "-one-to-one=false"}, ok...),
		"windows, advance": append([]string{"-check", "windows", "-one-to-one=false", "-window", "1m", "-window-advance", "2m"}, ok...),
		"dedupe, no by":    append([]string{"-check", "dedupe", "-one-to-one=false"}, ok...),
		"dedupe, 1:1":      append([]string{"-check", "dedupe", "-dedupe-by", ".seq"}, ok...),
		"dedupe, window 0": append([]string{"-check", "dedupe", "-one-to-one=false", "-dedupe-by", ".seq", "-dedupe-window", "0s"}, ok...),
		"dedupe, windows":  append([]string{"-check", "dedupe,windows", "-one-to-one=false", "-dedupe-by", ".seq", "-window", "1m"}, ok...),
		"join, no table":   append([]string{"-check", "join", "-join-into", ".row"}, ok...),
		"join, no into":    append([]string{"-check", "join", "-join-table", "t"}, ok...),
		"join, bad type":   append([]string{"-check", "join", "-join-table", "t", "-join-into", ".row", "-join-type", "outer"}, ok...),
		"join, inner 1:1":  append([]string{"-check", "join", "-join-table", "t", "-join-into", ".row"}, ok...),
		"join, by expr":    append([]string{"-check", "join", "-join-table", "t", "-join-into", ".row", "-join-by", "customer"}, ok...),
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "eoscheck: ") {
				t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := runCmd(t, "-h")
	if code != 0 || !strings.Contains(stdout, "-transaction-timeout") {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
}

func TestUnreachableBrokers(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := runCmd(t, "-brokers", "127.0.0.1:1", "-input", "in", "-output", "out", "-group", "g", "-timeout", "5s")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "cannot reach brokers 127.0.0.1:1") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

// TestEndToEnd plays an identity processor by hand on a kfake cluster:
// input, an aborted attempt, a committed retry with lineage, the group's
// offsets; then the command must find it clean, and a second run with one
// output doubled and one missing must show exactly that.
func TestEndToEnd(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(1))
	brokers := c.Brokers
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		return c.Client(t, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	txn := func(cl *kgo.Client, commit bool, recs ...*kgo.Record) {
		t.Helper()
		must(cl.BeginTransaction())
		must(cl.ProduceSync(ctx, recs...).FirstErr())
		must(cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	out := func(topic string, p int32, src check.Input) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Value: []byte("x"), Headers: []kgo.RecordHeader{
			{Key: record.HeaderSourceTopic, Value: []byte(src.Topic)},
			{Key: record.HeaderSourcePartition, Value: []byte(strconv.Itoa(int(src.Partition)))},
			{Key: record.HeaderSourceOffset, Value: []byte(strconv.FormatInt(src.Offset, 10))},
		}}
	}

	// scenario writes one run under prefix and returns the command's args.
	scenario := func(prefix string, dup, drop check.Input) []string {
		in, outT, group := prefix+"in", prefix+"out", prefix+"group"
		c.CreateTopics(t, 3, nil, in, outT)
		plain := newClient()
		for p := int32(0); p < 3; p++ {
			for i := range 8 {
				must(plain.ProduceSync(ctx, &kgo.Record{Topic: in, Partition: p, Value: []byte(strconv.Itoa(i))}).FirstErr())
			}
		}
		proc := newClient(kgo.TransactionalID(prefix + "txn"))
		txn(proc, false, out(outT, 2, check.Input{Topic: in, Partition: 2, Offset: 0}), out(outT, 2, check.Input{Topic: in, Partition: 2, Offset: 1}))
		var recs []*kgo.Record
		for p := int32(0); p < 3; p++ {
			for o := range int64(8) {
				src := check.Input{Topic: in, Partition: p, Offset: o}
				if src != drop {
					recs = append(recs, out(outT, p, src))
				}
			}
		}
		txn(proc, true, recs...)
		if dup.Topic != "" {
			txn(proc, true, out(outT, dup.Partition, dup))
		}
		offs := kadm.Offsets{}
		for p := int32(0); p < 3; p++ {
			offs.AddOffset(in, p, 8, -1)
		}
		must(c.Admin(t).CommitAllOffsets(ctx, group, offs))
		return []string{"-brokers", strings.Join(brokers, ","), "-input", in, "-output", outT, "-group", group, "-timeout", "30s"}
	}

	code, stdout, stderr := runCmd(t, scenario("good-", check.Input{}, check.Input{})...)
	if code != 0 || stderr != "" || !strings.HasSuffix(stdout, "result: CLEAN\n") {
		t.Errorf("clean run: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	for _, row := range []string{"inputs           24\n", "outputs visible  24\n", "outputs aborted  2\n"} {
		if !strings.Contains(stdout, row) {
			t.Errorf("clean run: no row %q in\n%s", row, stdout)
		}
	}

	code, stdout, stderr = runCmd(t, scenario("bad-", check.Input{Topic: "bad-in", Partition: 1, Offset: 4}, check.Input{Topic: "bad-in", Partition: 2, Offset: 6})...)
	if code != 1 || stderr != "" {
		t.Errorf("bad run: exit %d, stderr %q", code, stderr)
	}
	want := []string{
		"duplicate        1      bad-in/1@4 has 2 visible outputs",
		"lost             1      bad-in/2@6 is below the committed offset 8 but has no visible output (lost or skipped)\n",
		"result: 2 ANOMALIES (duplicate 1, lost 1)\n",
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("bad run: no %q in\n%s", w, stdout)
		}
	}
	t.Logf("bad run:\n%s", stdout)
}
