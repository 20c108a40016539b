package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/itest"
)

// httpOrder is the JSON value of the http test's input record i: a key
// of keys, and its sequence number within its key.
func httpOrder(topic string, i, keys int) *kgo.Record {
	k := "k" + strconv.Itoa(i%keys)
	return &kgo.Record{Topic: topic, Key: []byte(k), Value: fmt.Appendf(nil, `{"k":%q,"seq":%d}`, k, i/keys)}
}

// produceOrders writes records from to to of httpOrder's input.
func produceOrders(t *testing.T, tg *itest.Target, topic string, from, to, keys int) {
	t.Helper()
	cl, err := kgo.NewClient(tg.ClientOpts(kgo.ProducerLinger(2 * time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		recs = append(recs, httpOrder(topic, i, keys))
	}
	ctx, cancel := context.WithTimeout(t.Context(), itest.ProduceTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// The http transform with 8 requests in flight under key ordering, on one
// partition, SIGKILLed mid-run and restarted: every input is written
// exactly once, merged with the service's answer, each key's outputs in
// input order (eoscheck, one to one), although the killed attempt's
// requests were made again.
func TestHTTPTransformUnderCrash(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, seq, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		n, err := strconv.Atoi(seq)
		if err != nil {
			http.Error(w, "bad sequence number", http.StatusBadRequest)
			return
		}
		time.Sleep(time.Millisecond)
		fmt.Fprintf(w, `{"n":%d}`, 2*n)
	}))
	defer srv.Close()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		const n, keys = 6000, 100
		before := requests.Load()
		in, out, group := itest.Unique("http-in"), itest.Unique("http-out"), itest.Unique("http-group")
		tg.NewTopics(t, 1, in, out)
		produceOrders(t, tg, in, 0, n/3, keys)
		set := func(inst *launch.Instance) {
			inst.InstanceID = group + "-1"
			inst.Transforms = []string{"http"}
			inst.Settings = map[string]string{
				"PROCESSOR_HTTP_URL":           `"` + srv.URL + `/\(.k)/\(.seq)"`,
				"PROCESSOR_HTTP_RESPONSE":      ".record + {double: .response.body.n}",
				"PROCESSOR_HTTP_MAX_IN_FLIGHT": "8",
				"PROCESSOR_HTTP_TIMEOUT":       "500ms",
				"PROCESSOR_ORDERING":           "key",
			}
		}
		p1 := tg.StartBinary(t, group, group+"-1", in, out, set)
		itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
		produceOrders(t, tg, in, n/3, n, keys)
		time.Sleep(300 * time.Millisecond)
		p1.Kill(t)
		p2 := tg.StartBinary(t, group, group+"-1", in, out, set)
		tg.WaitCaughtUp(t, group, in)
		p2.Terminate(t)
		tg.Audit(t, group, []string{in}, []string{out})
		outs := tg.ReadAll(t, out, true)
		next := map[string]int{}
		for _, r := range outs {
			var v struct {
				K           string
				Seq, Double int
			}
			if err := json.Unmarshal(r.Value, &v); err != nil || v.K != string(r.Key) || v.Double != 2*v.Seq {
				t.Fatalf("output %s (key %s): %v; want the input merged with its answer", r.Value, r.Key, err)
			}
			if v.Seq != next[v.K] {
				t.Fatalf("key %s: output seq %d after %d outputs of the key, want each key's outputs once, in order", v.K, v.Seq, next[v.K])
			}
			next[v.K]++
		}
		if len(outs) != n {
			t.Errorf("%d outputs, want %d", len(outs), n)
		}
		t.Logf("%s: %d requests for %d inputs", tg.Name, requests.Load()-before, n)
	})
}
