package binaries

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// A bad value of a Kafka client setting exits 2 at once with one line
// naming the variable and the expected form.
func TestBinaryBadClientSettingExits2(t *testing.T) {
	t.Parallel()
	bin := itest.Binary(t)
	base := []string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out"}
	for _, c := range []struct{ set, want string }{
		{"PROCESSOR_COMPRESSION=brotli", `PROCESSOR_COMPRESSION="brotli" is invalid: want none, gzip, snappy, lz4 or zstd`},
		{"PROCESSOR_LINGER=-5ms", `PROCESSOR_LINGER="-5ms" is invalid: want a Go duration from 0 to 1m`},
		{"PROCESSOR_LINGER=soon", `PROCESSOR_LINGER="soon" is invalid: want a Go duration from 0 to 1m`},
		{"PROCESSOR_PRODUCE_BATCH_MAX_BYTES=512B", `PROCESSOR_PRODUCE_BATCH_MAX_BYTES="512B" is invalid: want a size from 1KiB to 100MiB`},
		{"PROCESSOR_FETCH_MAX_BYTES=1GiB", `PROCESSOR_FETCH_MAX_BYTES="1GiB" is invalid: want a size from 1MiB to 100MiB`},
		{"PROCESSOR_RACK=" + strings.Repeat("r", 513), `PROCESSOR_RACK="` + strings.Repeat("r", 513) + `" is invalid: want a rack or zone name of 1 to 512 bytes`},
		{"PROCESSOR_CLIENT_ID=a\tb", `PROCESSOR_CLIENT_ID="a\tb" is invalid: want a client id of 1 to 256 bytes without control characters`},
		{"PROCESSOR_START_OFFSET=yesterday", `PROCESSOR_START_OFFSET="yesterday" is invalid: want earliest, latest, a negative Go duration such as -1h, or an RFC 3339 time`},
		{"PROCESSOR_START_OFFSET=+1h", `PROCESSOR_START_OFFSET="+1h" is invalid`},
	} {
		if msg := itest.RunBadConfig(t, bin, append(slices.Clone(base), c.set)...); !strings.Contains(msg, c.want) || strings.Contains(msg, "goroutine") {
			t.Errorf("%s: stderr %q, want one line containing %q", c.set, msg, c.want)
		}
	}
}

// Without PROCESSOR_CLIENT_ID the brokers see each member of the group as
// processor-<group>-<instance id>, or processor-<group>-<hostname> without
// static membership.
func TestBinaryDefaultClientID(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, group := itest.Unique("cid-in"), itest.Unique("cid-out"), itest.Unique("cid-group")
		tg.NewTopics(t, 2, in, out)
		a := tg.StartBinary(t, group, group+"-a", in, out, func(i *launch.Instance) { i.InstanceID = "member-a" })
		b := tg.StartBinary(t, group, group+"-b", in, out)
		want := []string{"processor-" + group + "-" + config.Hostname(), "processor-" + group + "-member-a"}
		slices.Sort(want)
		var ids []string
		itest.WaitFor(t, 60*time.Second, "both instances in the group", func() bool {
			ids = tg.GroupClientIDs(t, group)
			slices.Sort(ids)
			return slices.Equal(ids, want)
		})
		a.Terminate(t)
		b.Terminate(t)
	})
}

// A transaction timeout above the brokers' transaction.max.timeout.ms
// exits 2 at start with one line naming PROCESSOR_TRANSACTION_TIMEOUT and
// the brokers' limit: on kfake set to 5s, against 8s; on Apache Kafka at
// its default of 15m, against 16m, which passes the configuration's own
// rules with a session timeout of 20m (within the brokers'
// group.max.session.timeout.ms, 30m by default).
func TestBinaryTransactionTimeoutAboveBrokerLimit(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, tg *itest.Target, txnTimeout, sessionTimeout time.Duration, want string) {
		in, out, group := itest.Unique("txnmax-in"), itest.Unique("txnmax-out"), itest.Unique("txnmax-group")
		tg.NewTopics(t, 1, in, out)
		p := tg.StartBinary(t, group, group+"-a", in, out, func(i *launch.Instance) {
			i.TransactionTimeout, i.SessionTimeout = txnTimeout, sessionTimeout
		})
		select {
		case <-p.Done:
		case <-time.After(60 * time.Second):
			t.Fatal("still running with a transaction timeout above the brokers' limit")
		}
		var ee *exec.ExitError
		logs := p.Logs.String()
		if !errors.As(p.Err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("exit %v, want code 2", p.Err)
		}
		var lines []string
		for l := range strings.Lines(logs) {
			if strings.Contains(l, "configuration error") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], want) || strings.Contains(logs, "goroutine ") {
			t.Errorf("configuration error lines %q, want one containing %q", lines, want)
		}
		if strings.Contains(logs, "INVALID_TRANSACTION_TIMEOUT") {
			t.Error("the producer ID was asked for with the refused timeout")
		}
	}
	t.Run("kfake", func(t *testing.T) {
		fake := &itest.Target{Cluster: kafkatest.NewFake(t, append(slices.Clone(itest.FakeOpts), kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "5000"}))...)}
		run(t, fake, 8*time.Second, 10*time.Second,
			`PROCESSOR_TRANSACTION_TIMEOUT="8s" is invalid: want a duration of at most the brokers' transaction.max.timeout.ms (5s)`)
	})
	if os.Getenv(kafkatest.BrokersVar) != "" {
		t.Run("kafka", func(t *testing.T) {
			run(t, &itest.Target{Cluster: kafkatest.FromEnv(t)}, 16*time.Minute, 20*time.Minute,
				`PROCESSOR_TRANSACTION_TIMEOUT="16m0s" is invalid: want a duration of at most the brokers' transaction.max.timeout.ms (15m0s)`)
		})
	}
}
