package binaries

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
)

// The Kafka client's settings (PROCESSOR_CLIENT_ID, _COMPRESSION, _RACK,
// _FETCH_MAX_BYTES, _PRODUCE_BATCH_MAX_BYTES, _START_OFFSET) as the brokers
// see them.

// codecs are the compression codes of record batches (Kafka's attributes,
// bits 0-2) by PROCESSOR_COMPRESSION.
var codecs = map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// Each compression codec writes its outputs so compressed; the group's
// member carries the configured client ID; and every fetch of the group
// client carries the rack and the fetch size (observed on kfake, which
// shows the requests; Apache Kafka's single broker has no replica in
// another rack to serve from).
func TestClientSettingsOnTheWire(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		for _, name := range config.Compressions {
			t.Run(name, func(t *testing.T) {
				in, out, group := itest.Unique("wire-in"), itest.Unique("wire-out"), itest.Unique("wire-"+name)
				tg.NewTopics(t, 1, in, out)
				recs := make([]*kgo.Record, 20)
				for i := range recs { // compressible: each codec makes the batch smaller
					recs[i] = &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i)), Value: bytes.Repeat([]byte("order "+strconv.Itoa(i)+" "), 100)}
				}
				tg.ProduceSync(t, recs)
				clientID, rack := itest.Unique("orders-"+name), "zone-"+name
				var fetches *kfake.FaultHandle
				if tg.Fake != nil {
					fetches = tg.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Observe: true, Count: -1, When: func(r kmsg.Request) bool {
						f, ok := r.(*kmsg.FetchRequest)
						return ok && f.Rack == rack && f.MaxBytes == 2<<20
					}})
				}
				a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, Out: out, Configure: func(c *config.Config) {
					c.ClientID, c.Compression, c.Rack, c.FetchMaxBytes = clientID, name, rack, 2<<20
				}})
				tg.WaitCaughtUp(t, group, in, a)
				if ids := tg.GroupClientIDs(t, group); len(ids) != 1 || ids[0] != clientID {
					t.Errorf("the group's members have client IDs %q, want [%s]", ids, clientID)
				}
				a.Stop(t)
				got := tg.ReadAll(t, out, true)
				if len(got) != len(recs) {
					t.Fatalf("%d outputs, want %d", len(got), len(recs))
				}
				for _, r := range got {
					if c := r.Attrs.CompressionType(); c != codecs[name] {
						t.Fatalf("output %s is in a batch of compression %d, want %d (%s)", r.Key, c, codecs[name], name)
					}
				}
				if fetches != nil && fetches.Hits() == 0 {
					t.Errorf("no fetch carried rack %q and a fetch size of 2MiB", rack)
				}
			})
		}
	})
}

// startCase is one PROCESSOR_START_OFFSET for a new group over records
// stamped three hours ago ("old-<i>") and half an hour ago
// ("recent-<i>").
type startCase struct {
	name  string
	value func(recent []*kgo.Record) string
	want  []string
}

// A group without committed offsets starts where PROCESSOR_START_OFFSET
// says: at the start, at a time (the first record stamped at or after it,
// to the millisecond), or a duration back from the start.
func TestStartOffset(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		cases := []startCase{
			{"earliest", func([]*kgo.Record) string { return "earliest" },
				[]string{"old-0", "old-1", "old-2", "recent-0", "recent-1", "recent-2"}},
			{"an hour back", func([]*kgo.Record) string { return "-1h" }, []string{"recent-0", "recent-1", "recent-2"}},
			{"at a record's time", func(recent []*kgo.Record) string { return recent[1].Timestamp.UTC().Format(time.RFC3339Nano) },
				[]string{"recent-1", "recent-2"}},
			{"a millisecond after a record's time", func(recent []*kgo.Record) string {
				return recent[1].Timestamp.Add(time.Millisecond).Format(time.RFC3339Nano)
			}, []string{"recent-2"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				in, out, group := itest.Unique("start-in"), itest.Unique("start-out"), itest.Unique("start-group")
				tg.NewTopics(t, 1, in, out)
				recent := produceStamped(t, tg, in)
				value := c.value(recent)
				a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, Out: out,
					Configure: func(cfg *config.Config) { cfg.StartOffset = value }})
				tg.WaitCaughtUp(t, group, in, a)
				a.Stop(t)
				if got := values(tg.ReadAll(t, out, true)); strings.Join(got, ",") != strings.Join(c.want, ",") {
					t.Errorf("START_OFFSET=%s: outputs %q, want %q", value, got, c.want)
				}
			})
		}
	})
}

// ProduceStamped writes old-0..2, stamped three hours ago a second apart,
// then recent-0..2, half an hour ago, and returns the recent ones with
// their timestamps.
func produceStamped(t *testing.T, tg *itest.Target, topic string) []*kgo.Record {
	t.Helper()
	now := time.Now().Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("old-" + strconv.Itoa(i)), Timestamp: now.Add(-3*time.Hour + time.Duration(i)*time.Second)})
	}
	for i := range 3 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("recent-" + strconv.Itoa(i)), Timestamp: now.Add(-30*time.Minute + time.Duration(i)*time.Second)})
	}
	tg.ProduceSync(t, recs)
	return recs[3:]
}

// values are the records' values, in order.
func values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// PROCESSOR_START_OFFSET=latest reads none of what was produced before the
// start, and what is produced after it; a committed offset wins over it:
// a restart with latest resumes where the group stopped, so records
// produced while it was down are processed, once.
func TestStartOffsetLatestAndCommitted(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, group := itest.Unique("latest-in"), itest.Unique("latest-out"), itest.Unique("latest-group")
		tg.NewTopics(t, 1, in, out)
		produceStamped(t, tg, in)
		latest := func(cfg *config.Config) { cfg.StartOffset = "latest" }
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, Out: out, Configure: latest})
		// When the group has placed itself at the end is not observable
		// from outside, so live records are written until one comes out.
		live := 0
		itest.WaitFor(t, 60*time.Second, "an output of a record produced after the start", func() bool {
			tg.ProduceSync(t, []*kgo.Record{{Topic: in, Value: []byte("live-" + strconv.Itoa(live))}})
			live++
			time.Sleep(200 * time.Millisecond)
			return len(tg.ReadAll(t, out, false)) > 0
		})
		tg.WaitCaughtUp(t, group, in, a)
		a.Stop(t)
		first := values(tg.ReadAll(t, out, true))
		for _, v := range first {
			if !strings.HasPrefix(v, "live-") {
				t.Errorf("output %q was produced before the start", v)
			}
		}

		// Down, then up again with latest: the committed offset wins.
		tg.ProduceSync(t, []*kgo.Record{{Topic: in, Value: []byte("while-down-0")}, {Topic: in, Value: []byte("while-down-1")}})
		b := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, Out: out, Configure: latest})
		tg.WaitCaughtUp(t, group, in, b)
		b.Stop(t)
		all := values(tg.ReadAll(t, out, true))
		want := append(append([]string{}, first...), "while-down-0", "while-down-1")
		if strings.Join(all, ",") != strings.Join(want, ",") {
			t.Errorf("after the restart with latest: outputs %q, want %q", all, want)
		}
	})
}

// PROCESSOR_PRODUCE_BATCH_MAX_BYTES bounds the largest record the
// producer sends: a record over it is dead-lettered (its value dropped,
// since the dead letter is held to the same limit) and the others commit,
// exactly once, with no loop of aborts.
func TestProduceBatchMaxBytes(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, dlq, group := itest.Unique("batchcap-in"), itest.Unique("batchcap-out"), itest.Unique("batchcap-dlq"), itest.Unique("batchcap-group")
		tg.NewTopics(t, 1, in, out, dlq)
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte("small" + strconv.Itoa(i)), Value: bytes.Repeat([]byte{'s'}, 200)})
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("big"), Value: itest.Incompressible(6000, 6000)})
		tg.ProduceSync(t, recs)
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, Out: out,
			OnError: pipeline.DeadLetter, DLQTopic: dlq, Configure: func(c *config.Config) { c.ProduceBatchMaxBytes = 4 << 10 }})
		tg.WaitCaughtUp(t, group, in, a)
		a.Stop(t)
		got := map[string]int{}
		for _, r := range tg.ReadAll(t, out, true) {
			got[string(r.Key)]++
		}
		for i := range 10 {
			if k := "small" + strconv.Itoa(i); got[k] != 1 {
				t.Errorf("%s is in the output %d times, want once", k, got[k])
			}
		}
		if got["big"] != 0 {
			t.Errorf("the record over the limit is in the output %d times", got["big"])
		}
		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != 1 || string(dead[0].Key) != "big" || len(dead[0].Value) != 0 || itest.HeaderValue(dead[0], record.HeaderErrorValueDropped) == "" {
			t.Fatalf("dead letters %d, want the big record's without its value", len(dead))
		}
	})
}

// With PROCESSOR_SINK=postgres a new group starts where
// PROCESSOR_START_OFFSET says too: neither the database nor the group has
// an offset for it.
func TestStartOffsetPostgres(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		db := pgtest.New(t)
		in, group := itest.Unique("pgstart-in"), itest.Unique("pgstart-group")
		tg.NewTopics(t, 1, in)
		produceStamped(t, tg, in)
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, DB: itest.OpenSink(t, db, group),
			Configure: func(c *config.Config) { c.StartOffset = "-1h" }})
		itest.WaitFor(t, 60*time.Second, "the group to store the input's end offset", func() bool { return itest.StoredTotal(t, db, group) == 6 })
		a.Stop(t)
		rows, err := db.Admin.Query(context.Background(), `SELECT convert_from(value_bytes, 'UTF8') FROM processor_records ORDER BY src_offset`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if want := "recent-0,recent-1,recent-2"; strings.Join(got, ",") != want {
			t.Errorf("rows %q, want %s", got, want)
		}
	})
}
