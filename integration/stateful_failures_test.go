package integration

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/state"
)

// deadLettered runs the stateful binary with the dead-letter policy.
func deadLettered(dlq string) func(*launch.Instance) {
	return func(inst *launch.Instance) { inst.OnError, inst.DLQTopic = "dlq", dlq }
}

// countsOf reads the committed counts of an aggregate by record key and
// fails the test on an output not keyed by its group key or a count that
// is not the one after the key's last.
func countsOf(t *testing.T, out []*kgo.Record) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range out {
		var v struct {
			Key   string `json:"key"`
			Value int    `json:"value"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("output %.80s: %v", r.Value, err)
		}
		if v.Key != string(r.Key) {
			t.Fatalf("output %.80s is keyed %.40q, not by its group key", r.Value, r.Key)
		}
		if v.Value != got[v.Key]+1 {
			t.Fatalf("key %.40s: count %d after %d", v.Key, v.Value, got[v.Key])
		}
		got[v.Key] = v.Value
	}
	return got
}

// A stage after aggregate that fails a record for good sends it to the
// dead-letter topic and leaves the count as it was: here jq fails every
// fourth count, so each key's counts stop at 3 and its later inputs are
// all dead letters. Had the failed record's write stood, the key's next
// input would have counted 5.
func TestStatefulFailedRecordLeavesNoState(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, tg *target) {
		in := input{topic: unique("undo-in"), n: 600, keys: 20}
		out, dlq, group := unique("undo-out"), unique("undo-dlq"), unique("undo-group")
		tg.createTopics(t, 2, in.topic, out, dlq)
		tg.produce(t, in, 0, in.n)
		p := tg.startBinary(t, group, group+"-1", in.topic, out,
			stateful(t.TempDir(), "key", "0.2", []string{"aggregate", "jq"},
				map[string]string{"PROCESSOR_JQ_EXPR": `if .value == 4 then error("the fourth count is refused") else . end`}),
			deadLettered(dlq))
		tg.waitCaughtUp(t, group, in.topic)
		p.terminate(t)
		got := countsOf(t, tg.readAll(t, out, true))
		dead := map[string]int{}
		for _, r := range tg.readAll(t, dlq, true) {
			dead[string(r.Key)]++
		}
		for k := range in.keys {
			key, n := "k"+strconv.Itoa(k), in.n/in.keys
			if got[key] != 3 || dead[key] != n-3 {
				t.Errorf("key %s: counted to %d with %d dead letters, want 3 and %d", key, got[key], dead[key], n-3)
			}
		}
	})
}

// A state write larger than the changelog topic accepts fails its record
// under the policy (a dead letter naming the changelog), at once: the
// transaction does not abort over and over, and the other keys count on.
func TestStatefulWriteTooLargeForChangelog(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, tg *target) {
		in := input{topic: unique("bigstate-in"), n: 200, keys: 10}
		out, dlq, group := unique("bigstate-out"), unique("bigstate-dlq"), unique("bigstate-group")
		tg.createTopics(t, 2, in.topic, out, dlq)
		changelog := state.ChangelogTopic(group, "aggregate")
		tg.createTopicWithConfigs(t, 2, map[string]string{"cleanup.policy": "compact", "max.message.bytes": "2000"}, changelog)
		big := strings.Repeat("K", 3000)
		tg.produce(t, in, 0, in.n/2)
		tg.ProduceSync(t, []*kgo.Record{{Topic: in.topic, Key: []byte(big), Value: []byte("big")}})
		tg.produce(t, in, in.n/2, in.n)
		p := tg.startBinary(t, group, group+"-1", in.topic, out,
			stateful(t.TempDir(), "partition", "0", []string{"aggregate"}, nil), deadLettered(dlq))
		tg.waitCaughtUpWithin(t, 60*time.Second, group, in.topic)
		p.terminate(t)
		got := countsOf(t, tg.readAll(t, out, true))
		for k := range in.keys {
			if key := "k" + strconv.Itoa(k); got[key] != in.n/in.keys {
				t.Errorf("key %s: counted %d of %d", key, got[key], in.n/in.keys)
			}
		}
		if got[big] != 0 {
			t.Errorf("the key too large for the changelog was counted %d times", got[big])
		}
		dead := tg.readAll(t, dlq, true)
		if len(dead) != 1 || string(dead[0].Key) != big || !strings.Contains(headerValue(dead[0], record.HeaderError), changelog) {
			t.Fatalf("dead letters %d, want the one too large for %s", len(dead), changelog)
		}
	})
}
