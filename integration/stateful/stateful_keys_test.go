package stateful

import (
	"bytes"
	be "encoding/binary"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/state"
)

// javaKeyed returns n records of each of the keys Java's LongSerializer
// (8 bytes, big-endian) and IntegerSerializer (4) write for 0..ids-1,
// rounds times over, so that every key's records are spread through the
// input: 2·ids distinct keys, most of them not UTF-8 (any with a byte of
// 0x80 or more).
func javaKeyed(topic string, ids, rounds int) []*kgo.Record {
	var recs []*kgo.Record
	for r := range rounds {
		for i := range ids {
			for _, key := range [][]byte{be.BigEndian.AppendUint64(nil, uint64(i)), be.BigEndian.AppendUint32(nil, uint32(i))} {
				recs = append(recs, &kgo.Record{Topic: topic, Key: key, Value: []byte(`{"round":` + strconv.Itoa(r) + `}`)})
			}
		}
	}
	return recs
}

// Keys as Java's LongSerializer and IntegerSerializer write them (Long
// and Integer 0..499, 1,000 keys, most not UTF-8), each three times,
// produced by a franz-go client with those exact bytes: aggregate counts
// each key on its own through a SIGKILL and injected aborts (eoscheck
// -check aggregate: counts 1, 2, 3 per key, every value naming its key,
// {"base64": ...} for those that are not UTF-8), its changelog holds one
// key per input key, and dedupe passes each key exactly once.
func TestStatefulJavaKeys(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		const ids, rounds = 500, 3
		in := itest.Unique("javakeys-in")
		out, group := itest.Unique("javakeys-out"), itest.Unique("javakeys-group")
		dout, dgroup := itest.Unique("javakeys-dedupe-out"), itest.Unique("javakeys-dedupe-group")
		tg.NewTopics(t, 4, in, out, dout)
		recs := javaKeyed(in, ids, rounds)
		tg.ProduceSync(t, recs[:len(recs)/2])

		set := itest.Stateful(t.TempDir(), "key", "0.2", []string{"aggregate"}, nil)
		p1 := tg.StartBinary(t, group, group+"-1", in, out, set)
		itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
		p1.Kill(t)
		p2 := tg.StartBinary(t, group, group+"-1", in, out, set)
		tg.ProduceSync(t, recs[len(recs)/2:])
		d := tg.StartBinary(t, dgroup, dgroup+"-1", in, dout, itest.Stateful(t.TempDir(), "key", "0.2", []string{"dedupe"}, nil))
		tg.WaitCaughtUp(t, group, in)
		tg.WaitCaughtUp(t, dgroup, in)
		p2.Terminate(t)
		d.Terminate(t)

		rep := tg.AuditRun(t, group, in, out, check.Options{OneToOne: true, ExpectAll: true, Aggregate: true})
		if ag := rep.Aggregate; ag == nil || ag.Keys != 2*ids || ag.Final != int64(len(recs)) || ag.Max != rounds {
			t.Errorf("aggregate totals %+v, want %d keys counted to %d each", rep.Aggregate, 2*ids, rounds)
		}
		base64s := 0
		for _, r := range tg.ReadAll(t, out, true) {
			var v struct{ Key json.RawMessage }
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("output %q: %v", r.Value, err)
			}
			if key, err := record.ParseKeyJSON(v.Key); err != nil || !bytes.Equal(key, r.Key) {
				t.Fatalf("output keyed %x names %s (%x, %v)", r.Key, v.Key, key, err)
			}
			if bytes.HasPrefix(v.Key, []byte(`{"base64"`)) {
				base64s++
			}
		}
		if base64s == 0 {
			t.Error("no output named its key in base64: the keys were all UTF-8")
		}
		changelog := map[string]bool{}
		for _, r := range tg.ReadAll(t, state.ChangelogTopic(group, "aggregate"), true) {
			changelog[string(r.Key)] = true
		}
		if len(changelog) != 2*ids {
			t.Errorf("the changelog holds %d keys for %d input keys", len(changelog), 2*ids)
		}

		tg.AuditRun(t, dgroup, in, dout, check.Options{ExpectAll: true})
		passed := map[string]int{}
		for _, r := range tg.ReadAll(t, dout, true) {
			passed[string(r.Key)]++
		}
		for _, r := range recs[:2*ids] {
			if passed[string(r.Key)] != 1 {
				t.Fatalf("dedupe passed key %x %d times, want once (%d keys passed)", r.Key, passed[string(r.Key)], len(passed))
			}
		}
		if len(passed) != 2*ids {
			t.Errorf("dedupe passed %d keys, want %d", len(passed), 2*ids)
		}
	})
}

// A sum over numbers beyond the bound (1e999999, 1e-401, and a sum
// reaching 1e308) dead-letters exactly those records, each naming FIELD
// and the bound, at once; every output is JSON, small, and the exact sum
// of the key's inputs taken.
func TestStatefulSumBound(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Unique("bound-in")
		out, dlq, group := itest.Unique("bound-out"), itest.Unique("bound-dlq"), itest.Unique("bound-group")
		tg.NewTopics(t, 2, in, out, dlq)
		amounts := []string{"1.5", "1e999999", "2", "1e-401", "9e307", "9e307", "-0.25", "123456789012345678901234567890", "1e-30", "-0"}
		bad := map[string]bool{"1e999999": true, "1e-401": true}
		var recs []*kgo.Record
		for i := range 200 {
			key := "k" + strconv.Itoa(i%10)
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(key), Value: []byte(`{"amount":` + amounts[i/10%len(amounts)] + `}`)})
		}
		tg.ProduceSync(t, recs)
		start := time.Now()
		p := tg.StartBinary(t, group, group+"-1", in, out,
			itest.Stateful(t.TempDir(), "partition", "0", []string{"aggregate"},
				map[string]string{"PROCESSOR_AGGREGATE_FUNCTION": "sum", "PROCESSOR_AGGREGATE_FIELD": ".amount"}),
			itest.DeadLettered(dlq))
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)
		t.Logf("%s: the run, start to caught up, took %v", tg.Name, time.Since(start).Round(time.Millisecond))

		sums, wantDead := map[string]*big.Rat{}, 0
		lim, _ := new(big.Rat).SetString("1e308")
		for _, r := range recs {
			amount := strings.TrimSuffix(strings.TrimPrefix(string(r.Value), `{"amount":`), "}")
			if bad[amount] {
				wantDead++
				continue
			}
			x, _ := new(big.Rat).SetString(amount)
			next := new(big.Rat).Add(x, orZero(sums[string(r.Key)]))
			if new(big.Rat).Abs(next).Cmp(lim) >= 0 {
				wantDead++
				continue
			}
			sums[string(r.Key)] = next
		}
		got := map[string]*big.Rat{}
		for _, r := range tg.ReadAll(t, out, true) {
			dec := json.NewDecoder(bytes.NewReader(r.Value))
			dec.UseNumber()
			var v struct{ Value json.Number }
			if !json.Valid(r.Value) || dec.Decode(&v) != nil || len(r.Value) > 400 {
				t.Fatalf("output %.200s (%d bytes) is not small JSON", r.Value, len(r.Value))
			}
			got[string(r.Key)], _ = new(big.Rat).SetString(string(v.Value))
		}
		for k, want := range sums {
			if got[k] == nil || got[k].Cmp(want) != 0 {
				t.Errorf("key %s: sum %v, want %v", k, got[k], want.FloatString(30))
			}
		}
		dead := tg.ReadAll(t, dlq, true)
		for _, d := range dead {
			if e := itest.HeaderValue(d, record.HeaderError); !strings.Contains(e, "FIELD .amount") || !strings.Contains(e, "1e308") {
				t.Errorf("dead letter %s: error %q names neither FIELD nor the bound", d.Value, e)
			}
		}
		if len(dead) != wantDead {
			t.Errorf("%d dead letters, want %d", len(dead), wantDead)
		}
	})
}

func orZero(x *big.Rat) *big.Rat {
	if x == nil {
		return new(big.Rat)
	}
	return x
}
