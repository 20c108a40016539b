package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/jq"
)

// One large order that an ordinary jq program multiplies past
// PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD (one output per item, each holding
// the whole order: about 5 GB) fails that record alone, under the policy:
// with dlq its dead letter is the order as it arrived, naming jq and the
// limit, and every other input's outputs are committed exactly once. The
// process neither runs out of memory nor stops.
func TestAmplifyingRecordDeadLettered(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, dlq, group := itest.Unique("amp-in"), itest.Unique("amp-out"), itest.Unique("amp-dlq"), itest.Unique("amp-group")
		tg.NewTopics(t, 1, in, out, dlq)
		chain, err := transform.Default.Build([]transform.Entry{{Name: "jq"}}, func(_ transform.Entry, s string) (string, bool) {
			return `.items[] as $i | .item = $i`, s == "EXPR"
		}, transform.MaxOutputBytes(4<<20), transform.WithNames(app.SettingNames()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = chain.Close() })

		// Small orders of two items, and at offset 10 one of 4,000 items
		// of 200 bytes (about 840 KB, under the topic's limit).
		item := strings.Repeat("x", 200)
		var big strings.Builder
		big.WriteString(`{"id":"big","items":[`)
		for i := range 4000 {
			if i > 0 {
				big.WriteByte(',')
			}
			fmt.Fprintf(&big, `"%d-%s"`, i, item)
		}
		big.WriteString(`]}`)
		var recs []*kgo.Record
		for i := range 20 {
			v := fmt.Sprintf(`{"id":"o%d","items":["a","b"]}`, i)
			if i == 10 {
				v = big.String()
			}
			recs = append(recs, &kgo.Record{Topic: in, Value: []byte(v)})
		}
		tg.ProduceLarge(t, recs...)

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in}, Out: out, Chain: chain,
			OnError: pipeline.DeadLetter, DLQTopic: dlq})
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in, a)
		if err := a.Pipeline.Healthy(); err != nil {
			t.Errorf("unhealthy after the amplifying record: %v", err)
		}
		a.Stop(t)

		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != 1 {
			t.Fatalf("%d dead letters, want 1", len(dead))
		}
		d := dead[0]
		if src, ok := check.Lineage(d); !ok || src.Offset != 10 {
			t.Errorf("the dead letter is of %+v, want offset 10", src)
		}
		if string(d.Value) != big.String() {
			t.Errorf("the dead letter's value is %d bytes, want the order as it arrived (%d bytes)", len(d.Value), big.Len())
		}
		if msg := itest.HeaderValue(d, record.HeaderError); !strings.Contains(msg, "PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD=4MiB") {
			t.Errorf("the dead letter's error %q does not name the byte limit", msg)
		}
		if got := itest.HeaderValue(d, record.HeaderErrorTransform); got != "jq" {
			t.Errorf("the dead letter's stage is %q, want jq", got)
		}
		outs := tg.ReadAll(t, out, true)
		seen := map[string]int{}
		for _, r := range outs {
			seen[string(r.Value)]++
		}
		for i := range 20 {
			if i == 10 {
				continue
			}
			for _, it := range []string{"a", "b"} {
				v := fmt.Sprintf(`{"id":"o%d","item":"%s","items":["a","b"]}`, i, it)
				if seen[v] != 1 {
					t.Errorf("output %s appears %d times, want once", v, seen[v])
				}
			}
		}
		if len(outs) != 38 {
			t.Errorf("%d outputs, want 38", len(outs))
		}
	})
}
