package stateful

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/state"
)

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
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("undo-in"), N: 600, Keys: 20}
		out, dlq, group := itest.Unique("undo-out"), itest.Unique("undo-dlq"), itest.Unique("undo-group")
		tg.NewTopics(t, 2, in.Topic, out, dlq)
		tg.Produce(t, in, 0, in.N)
		p := tg.StartBinary(t, group, group+"-1", in.Topic, out,
			itest.Stateful(t.TempDir(), "key", "0.2", []string{"aggregate", "jq"},
				map[string]string{"PROCESSOR_JQ_EXPR": `if .value == 4 then error("the fourth count is refused") else . end`}),
			itest.DeadLettered(dlq))
		tg.WaitCaughtUp(t, group, in.Topic)
		p.Terminate(t)
		got := countsOf(t, tg.ReadAll(t, out, true))
		dead := map[string]int{}
		for _, r := range tg.ReadAll(t, dlq, true) {
			dead[string(r.Key)]++
		}
		for k := range in.Keys {
			key, n := "k"+strconv.Itoa(k), in.N/in.Keys
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
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("bigstate-in"), N: 200, Keys: 10}
		out, dlq, group := itest.Unique("bigstate-out"), itest.Unique("bigstate-dlq"), itest.Unique("bigstate-group")
		tg.NewTopics(t, 2, in.Topic, out, dlq)
		changelog := state.ChangelogTopic(group, "aggregate")
		tg.CreateTopicWithConfigs(t, 2, map[string]string{"cleanup.policy": "compact", "max.message.bytes": "2000"}, changelog)
		big := strings.Repeat("K", 3000)
		tg.Produce(t, in, 0, in.N/2)
		tg.ProduceSync(t, []*kgo.Record{{Topic: in.Topic, Key: []byte(big), Value: []byte("big")}})
		tg.Produce(t, in, in.N/2, in.N)
		p := tg.StartBinary(t, group, group+"-1", in.Topic, out,
			itest.Stateful(t.TempDir(), "partition", "0", []string{"aggregate"}, nil), itest.DeadLettered(dlq))
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in.Topic)
		p.Terminate(t)
		got := countsOf(t, tg.ReadAll(t, out, true))
		for k := range in.Keys {
			if key := "k" + strconv.Itoa(k); got[key] != in.N/in.Keys {
				t.Errorf("key %s: counted %d of %d", key, got[key], in.N/in.Keys)
			}
		}
		if got[big] != 0 {
			t.Errorf("the key too large for the changelog was counted %d times", got[big])
		}
		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != 1 || string(dead[0].Key) != big || !strings.Contains(itest.HeaderValue(dead[0], record.HeaderError), changelog) {
			t.Fatalf("dead letters %d, want the one too large for %s", len(dead), changelog)
		}
	})
}
