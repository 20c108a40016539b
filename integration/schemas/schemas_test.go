package schemas

import (
	"bytes"
	"context"
	binenc "encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/srserver"
	"github.com/streamproc/processor/internal/testkit/interop"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/schema"
)

// newSRClient is the test's client of the registry at url.
func newSRClient(t testing.TB, url string) schema.Registry {
	t.Helper()
	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// startSRServer starts an in-process registry on addr (port 0: a free
// one), keeping its state in dir when set, and closes it when t ends.
func startSRServer(t testing.TB, addr, dir string) (*srserver.Server, string) {
	t.Helper()
	s, err := srserver.New(srserver.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, url
}

// forEachRegistry runs fn in a subtest "srserver" against an in-process
// registry, and, when PROCESSOR_TEST_SCHEMA_REGISTRY_URL is set, in a
// subtest "registry" against that one too.
func forEachRegistry(t *testing.T, fn func(t *testing.T, r *itest.SREnv)) {
	t.Helper()
	t.Run("srserver", func(t *testing.T) {
		_, url := startSRServer(t, "127.0.0.1:0", "")
		fn(t, &itest.SREnv{Name: "srserver", URL: url, Reg: newSRClient(t, url)})
	})
	if url := os.Getenv(interop.RegistryVar); url != "" {
		t.Run("registry", func(t *testing.T) {
			fn(t, &itest.SREnv{Name: "registry", URL: url, Reg: newSRClient(t, url)})
		})
	}
}

// forEachSchemaTarget runs fn against every broker target and, on each,
// every registry.
func forEachSchemaTarget(t *testing.T, fn func(t *testing.T, tg *itest.Target, r *itest.SREnv)) {
	t.Helper()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		forEachRegistry(t, func(t *testing.T, r *itest.SREnv) { fn(t, tg, r) })
	})
}

// encode is js in the wire format of enc.
func encode(t testing.TB, enc *schema.Encoder, js string) []byte {
	t.Helper()
	b, err := enc.Encode(nil, []byte(js))
	if err != nil {
		t.Fatalf("encoding %s: %v", js, err)
	}
	return b
}

// wireID is the schema id of a wire-format value's header, -1 if it has
// none.
func wireID(b []byte) int {
	if len(b) < 5 || b[0] != 0 {
		return -1
	}
	return int(binenc.BigEndian.Uint32(b[1:5]))
}

// decodeJSON decodes a wire-format value of format f with dec into a map,
// numbers kept as json.Number.
func decodeJSON(t testing.TB, dec *schema.Decoder, b []byte) (map[string]any, error) {
	t.Helper()
	js, err := dec.Decode(context.Background(), b, nil)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("decoded value %s is not a JSON object: %w", js, err)
	}
	return m, nil
}

// The schemas of the format tests: an input record, and the output's,
// which differs (another name) so that its schema id does too.
type formatCase struct {
	f         schema.Format
	in, out   string
	amount    string // the amount's field as the decoded JSON names it
	inputJSON func(i int) string
}

var formatCases = []formatCase{
	{f: schema.Avro, amount: "amount_cents",
		in:  `{"type":"record","name":"Payment","namespace":"e2e","fields":[{"name":"id","type":"string"},{"name":"amount_cents","type":"long"}]}`,
		out: `{"type":"record","name":"PaymentOut","namespace":"e2e","fields":[{"name":"id","type":"string"},{"name":"amount_cents","type":"long"}]}`},
	{f: schema.Protobuf, amount: "amountCents",
		in:  "syntax = \"proto3\";\npackage e2e;\nmessage Payment { string id = 1; int32 amount_cents = 2; }\n",
		out: "syntax = \"proto3\";\npackage e2e.out;\nmessage PaymentOut { string id = 1; int32 amount_cents = 2; }\n"},
	{f: schema.JSONSchema, amount: "amount_cents",
		in: `{"type":"object","title":"Payment","properties":{"id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["id","amount_cents"]}`,
		out: `{"type":"object","title":"PaymentOut","properties":{"id":{"type":"string"},"amount_cents":{"type":"integer"}},` +
			`"required":["id","amount_cents"],"additionalProperties":false}`},
}

// paymentJSON is payment i as the input's JSON: amount i+1 (never 0,
// which protojson leaves out).
func paymentJSON(i int) string {
	return fmt.Sprintf(`{"id":"p-%d","amount_cents":%d}`, i, i+1)
}

// outputsByID decodes outs with dec and returns them by their id field,
// failing the test on a value that does not decode or has another schema
// id than wantID (any id when wantID is -1).
func outputsByID(t testing.TB, dec *schema.Decoder, outs []*kgo.Record, wantID int) map[string][]map[string]any {
	t.Helper()
	got := map[string][]map[string]any{}
	for _, r := range outs {
		if id := wireID(r.Value); wantID >= 0 && id != wantID {
			t.Errorf("output at %d/%d has schema id %d, want the output subject's %d", r.Partition, r.Offset, id, wantID)
		}
		m, err := decodeJSON(t, dec, r.Value)
		if err != nil {
			t.Errorf("output at %d/%d does not decode: %v", r.Partition, r.Offset, err)
			continue
		}
		id, _ := m["id"].(string)
		got[id] = append(got[id], m)
	}
	return got
}

// checkAmounts asserts that got holds the n payments exactly once, each
// with twice its input amount under field.
func checkAmounts(t testing.TB, got map[string][]map[string]any, n int, field string) {
	t.Helper()
	bad := 0
	for i := range n {
		id := "p-" + strconv.Itoa(i)
		ms := got[id]
		if len(ms) != 1 {
			t.Errorf("payment %s output %d times, want once", id, len(ms))
			bad++
		} else if a := fmt.Sprint(ms[0][field]); a != strconv.Itoa(2*(i+1)) {
			t.Errorf("payment %s: %s = %s, want %d (twice the input's)", id, field, a, 2*(i+1))
			bad++
		}
		if bad > 10 {
			t.Fatal("too many failures")
		}
	}
	if len(got) != n {
		t.Errorf("%d distinct payments output, want %d", len(got), n)
	}
}

// Each format, exactly once: Avro, Protobuf and JSON Schema records,
// decoded by the schema id they carry, doubled by jq and encoded with the
// output subject's schema, come out once each, read_committed, with the
// doubled amount, the output subject's schema id and lineage headers
// naming the input they came from.
func TestSchemaFormatsExactlyOnce(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		for _, fc := range formatCases {
			t.Run(string(fc.f), func(t *testing.T) {
				const n = 300
				in, out, group := itest.Unique("sr-fmt-in"), itest.Unique("sr-fmt-out"), itest.Unique("sr-fmt-group")
				tg.NewTopics(t, 3, in, out)
				inSubj := r.Register(t, in+"-value", fc.f, fc.in)
				outSubj := r.Register(t, out+"-value", fc.f, fc.out)
				if inSubj.ID == outSubj.ID {
					t.Fatalf("the input and output schemas have one id %d; the test needs two", inSubj.ID)
				}
				enc := r.Encoder(t, inSubj)
				recs := make([]*kgo.Record, n)
				for i := range recs {
					recs[i] = &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i%7)), Value: encode(t, enc, paymentJSON(i))}
				}
				tg.SyncProduce(t, recs...)
				src := map[string]string{}
				for i, rec := range recs {
					src["p-"+strconv.Itoa(i)] = itest.SrcKey(rec)
				}

				p := itest.RunBinary(t, group, tg.SchemaInstance(r, group, in, out, fc.f, "."+fc.amount+" *= 2"))
				tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
				outs := tg.ReadAll(t, out, true)
				got := outputsByID(t, schema.NewDecoder(r.Reg, fc.f, schema.DecoderOptions{}), outs, outSubj.ID)
				checkAmounts(t, got, n, fc.amount)
				for _, o := range outs {
					s, ok := itest.SourceOf(o)
					m, err := decodeJSON(t, schema.NewDecoder(r.Reg, fc.f, schema.DecoderOptions{}), o.Value)
					if err != nil {
						continue
					}
					if id, _ := m["id"].(string); !ok || s != src[id] {
						t.Errorf("output %v has lineage %q (%v), want %q", m["id"], s, ok, src[id])
					}
				}
				p.Terminate(t)
			})
		}
	})
}

// logLine returns the first line of logs that contains every one of
// subs, "" if none.
func logLine(logs string, subs ...string) string {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			return l
		}
	}
	return ""
}

// The Avro schemas of the evolution test: the input's v1 and v2 (a field
// added with a default: BACKWARD compatible), and the output's v1 and v2
// (another field added with a default).
const (
	payV1    = `{"type":"record","name":"Payment","namespace":"e2e","fields":[{"name":"id","type":"string"},{"name":"amount_cents","type":"long"}]}`
	payV2    = `{"type":"record","name":"Payment","namespace":"e2e","fields":[{"name":"id","type":"string"},{"name":"amount_cents","type":"long"},{"name":"currency","type":"string","default":"EUR"}]}`
	payOutV1 = `{"type":"record","name":"PaymentOut","namespace":"e2e","fields":[{"name":"id","type":"string"},{"name":"amount_cents","type":"long"},{"name":"currency","type":"string","default":"EUR"}]}`
	payOutV2 = `{"type":"record","name":"PaymentOut","namespace":"e2e","fields":[{"name":"id","type":"string"},{"name":"amount_cents","type":"long"},{"name":"currency","type":"string","default":"EUR"},{"name":"channel","type":"string","default":"web"}]}`
)

// Schema evolution while the processor runs: records of the input's v1,
// then of a v2 registered meanwhile, all decode and are encoded with the
// output subject's schema (a field the chain's output lacks gets its
// default); and a new version of the output subject, registered while it
// runs, is used within PROCESSOR_OUTPUT_SCHEMA_REFRESH_INTERVAL=1s: the
// records written after it carry its schema id and its new field.
func TestSchemaEvolution(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		const batch = 100
		in, out, group := itest.Unique("sr-evo-in"), itest.Unique("sr-evo-out"), itest.Unique("sr-evo-group")
		tg.NewTopics(t, 3, in, out)
		v1 := r.Register(t, in+"-value", schema.Avro, payV1)
		outV1 := r.Register(t, out+"-value", schema.Avro, payOutV1)
		write := func(enc *schema.Encoder, from int, currency string) {
			var recs []*kgo.Record
			for i := from; i < from+batch; i++ {
				js := paymentJSON(i)
				if currency != "" {
					js = fmt.Sprintf(`{"id":"p-%d","amount_cents":%d,"currency":%q}`, i, i+1, currency)
				}
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i%5)), Value: encode(t, enc, js)})
			}
			tg.SyncProduce(t, recs...)
		}
		inst := tg.SchemaInstance(r, group, in, out, schema.Avro, ".amount_cents *= 2")
		inst.Extra = append(inst.Extra, "PROCESSOR_OUTPUT_SCHEMA_REFRESH_INTERVAL=1s")
		p := itest.RunBinary(t, group, inst)

		write(r.Encoder(t, v1), 0, "")
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		v2 := r.Register(t, in+"-value", schema.Avro, payV2)
		if v2.ID == v1.ID || v2.Version != 2 {
			t.Fatalf("input v2 registered as %+v, want version 2 with a new id", v2)
		}
		write(r.Encoder(t, v2), batch, "USD")
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)

		outV2 := r.Register(t, out+"-value", schema.Avro, payOutV2)
		itest.WaitFor(t, 15*time.Second, "the processor to say it uses the new output schema", func() bool {
			return logLine(p.Logs.String(), "a new output schema version is in use", "schema_id="+strconv.Itoa(outV2.ID)) != ""
		})
		write(r.Encoder(t, v2), 2*batch, "CHF")
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)

		dec := schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{})
		outs := tg.ReadAll(t, out, true)
		got := outputsByID(t, dec, outs, -1)
		checkAmounts(t, got, 3*batch, "amount_cents")
		for _, o := range outs {
			m, err := decodeJSON(t, dec, o.Value)
			if err != nil {
				continue
			}
			i, _ := strconv.Atoi(strings.TrimPrefix(m["id"].(string), "p-"))
			wantID, currency, channel := outV1.ID, "EUR", any(nil)
			switch {
			case i >= 2*batch:
				wantID, currency, channel = outV2.ID, "CHF", "web"
			case i >= batch:
				currency = "USD"
			}
			if id := wireID(o.Value); id != wantID || m["currency"] != currency || m["channel"] != channel {
				t.Errorf("payment %d: schema id %d, currency %v, channel %v; want %d, %s, %v", i, id, m["currency"], m["channel"], wantID, currency, channel)
			}
		}
		p.Terminate(t)
	})
}

// Pass-through: a chain that reads no value (identity) leaves Avro values
// undecoded, so every output value is byte-identical to its input,
// garbage behind a magic byte included (it would not decode), and a
// tombstone stays a tombstone. And when the output format differs
// (Avro in, JSON Schema out), the same chain transcodes every value while
// a tombstone still comes out null.
func TestSchemaPassThrough(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		in, out, group := itest.Unique("sr-pass-in"), itest.Unique("sr-pass-out"), itest.Unique("sr-pass-group")
		tg.NewTopics(t, 2, in, out)
		inSubj := r.Register(t, in+"-value", schema.Avro, payV1)
		r.Register(t, out+"-value", schema.Avro, formatCases[0].out)
		enc := r.Encoder(t, inSubj)
		var recs []*kgo.Record
		for i := range 50 {
			v := encode(t, enc, paymentJSON(i))
			switch i % 10 {
			case 3: // a magic byte, the input's id, then bytes no Avro reader takes
				v = append([]byte{0, 0, 0, 0, 0}, 0xff, 0xfe, 0xfd, byte(i))
				binenc.BigEndian.PutUint32(v[1:5], uint32(inSubj.ID))
			case 7:
				v = nil
			}
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i)), Value: v})
		}
		tg.SyncProduce(t, recs...)
		want := map[string][]byte{}
		for _, rec := range recs {
			want[itest.SrcKey(rec)] = rec.Value
		}
		p := itest.RunBinary(t, group, tg.SchemaInstance(r, group, in, out, schema.Avro, ""))
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)
		if !strings.Contains(p.Logs.String(), "bytes pass through undecoded") {
			t.Error("the log does not say the values pass through undecoded")
		}
		outs := tg.ReadAll(t, out, true)
		if len(outs) != len(recs) {
			t.Errorf("%d outputs, want %d", len(outs), len(recs))
		}
		for _, o := range outs {
			s, _ := itest.SourceOf(o)
			w, ok := want[s]
			if !ok || !bytes.Equal(o.Value, w) || (w == nil) != (o.Value == nil) {
				t.Errorf("output from %q: value %x (nil %v), want the input's %x (nil %v)", s, o.Value, o.Value == nil, w, w == nil)
			}
			delete(want, s)
		}

		// Transcoding: the good records only, and a tombstone.
		in2, out2, group2 := itest.Unique("sr-trans-in"), itest.Unique("sr-trans-out"), itest.Unique("sr-trans-group")
		tg.NewTopics(t, 1, in2, out2)
		r.Register(t, in2+"-value", schema.Avro, payV1)
		jsOut := r.Register(t, out2+"-value", schema.JSONSchema, formatCases[2].out)
		var recs2 []*kgo.Record
		for i := range 20 {
			v := encode(t, enc, paymentJSON(i))
			if i == 5 {
				v = nil
			}
			recs2 = append(recs2, &kgo.Record{Topic: in2, Key: []byte("k" + strconv.Itoa(i)), Value: v})
		}
		tg.SyncProduce(t, recs2...)
		inst := tg.SchemaInstance(r, group2, in2, out2, schema.Avro, "")
		inst.Extra = append(inst.Extra, "PROCESSOR_OUTPUT_VALUE_FORMAT=json_schema")
		p2 := itest.RunBinary(t, group2, inst)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group2, in2)
		p2.Terminate(t)
		dec := schema.NewDecoder(r.Reg, schema.JSONSchema, schema.DecoderOptions{})
		outs2 := tg.ReadAll(t, out2, true)
		if len(outs2) != len(recs2) {
			t.Fatalf("%d transcoded outputs, want %d", len(outs2), len(recs2))
		}
		for i, o := range outs2 {
			if i == 5 {
				if o.Value != nil {
					t.Errorf("the tombstone came out as %x, want null", o.Value)
				}
				continue
			}
			m, err := decodeJSON(t, dec, o.Value)
			if err != nil || wireID(o.Value) != jsOut.ID || m["id"] != "p-"+strconv.Itoa(i) || fmt.Sprint(m["amount_cents"]) != strconv.Itoa(i+1) {
				t.Errorf("transcoded output %d: id %d, %v, %v; want schema id %d and payment p-%d", i, wireID(o.Value), m, err, jsOut.ID, i)
			}
		}
	})
}

// Avro keys and values with a chain that reads values only (jq): the
// keys pass through undecoded, byte-identical, so the processor needs no
// schema for output keys and starts without an <output topic>-key
// subject; the values are decoded, doubled and encoded with the output
// value subject's schema.
func TestSchemaKeysPassThrough(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		const n = 40
		in, out, group := itest.Unique("sr-keys-in"), itest.Unique("sr-keys-out"), itest.Unique("sr-keys-group")
		tg.NewTopics(t, 2, in, out)
		keySubj := r.Register(t, in+"-key", schema.Avro, `{"type":"record","name":"PaymentKey","namespace":"e2e","fields":[{"name":"account","type":"string"}]}`)
		inSubj := r.Register(t, in+"-value", schema.Avro, payV1)
		outSubj := r.Register(t, out+"-value", schema.Avro, formatCases[0].out)
		kenc, venc := r.Encoder(t, keySubj), r.Encoder(t, inSubj)
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: in, Key: encode(t, kenc, fmt.Sprintf(`{"account":"acct-%d"}`, i%6)), Value: encode(t, venc, paymentJSON(i))})
		}
		tg.SyncProduce(t, recs...)
		keys := map[string][]byte{}
		for _, rec := range recs {
			keys[itest.SrcKey(rec)] = rec.Key
		}
		inst := tg.SchemaInstance(r, group, in, out, schema.Avro, ".amount_cents *= 2")
		inst.Extra = append(inst.Extra, "PROCESSOR_KEY_FORMAT=avro")
		p := itest.RunBinary(t, group, inst)
		itest.WaitFor(t, 60*time.Second, "the group to catch up", func() bool {
			select {
			case <-p.Done:
				t.Fatalf("the processor exited: %v", p.Err)
			default:
			}
			return tg.IsCaughtUp(t, group, in)
		})
		p.Terminate(t)
		outs := tg.ReadAll(t, out, true)
		checkAmounts(t, outputsByID(t, schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{}), outs, outSubj.ID), n, "amount_cents")
		for _, o := range outs {
			s, _ := itest.SourceOf(o)
			if !bytes.Equal(o.Key, keys[s]) {
				t.Errorf("output from %s: key %x, want the input's %x", s, o.Key, keys[s])
			}
		}
	})
}

// Routed outputs are encoded with their own topic's subject (the topic
// name strategy): jq doubles the amount and route sends each record to a
// topic by its region; each destination's records carry that topic's
// <topic>-value schema id, and a record routed to a topic whose subject
// has no version fails under PROCESSOR_ON_ERROR=dlq, its dead letter
// naming the encode stage and the missing subject.
func TestSchemaRoutedSubjects(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		const n = 60
		prefix := itest.Unique("sr-route")
		in, out, dlq, group := prefix+"-in", prefix+"-out", prefix+"-dlq", prefix+"-group"
		regions := []string{"eu", "us", "ap"} // ap's topic has no subject
		tg.NewTopics(t, 2, in, out, dlq, prefix+"-eu", prefix+"-us", prefix+"-ap")
		recordSchema := func(name string) string {
			return `{"type":"record","name":"` + name + `","namespace":"e2e","fields":[{"name":"id","type":"string"},` +
				`{"name":"amount_cents","type":"long"},{"name":"region","type":"string"}]}`
		}
		inSubj := r.Register(t, in+"-value", schema.Avro, recordSchema("Regional"))
		r.Register(t, out+"-value", schema.Avro, recordSchema("Unrouted"))
		ids := map[string]int{}
		for _, reg := range regions[:2] {
			ids[prefix+"-"+reg] = r.Register(t, prefix+"-"+reg+"-value", schema.Avro, recordSchema("Region_"+reg)).ID
		}
		enc := r.Encoder(t, inSubj)
		var recs []*kgo.Record
		for i := range n {
			js := fmt.Sprintf(`{"id":"p-%d","amount_cents":%d,"region":%q}`, i, i+1, regions[i%3])
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i)), Value: encode(t, enc, js)})
		}
		tg.SyncProduce(t, recs...)
		inst := tg.SchemaInstance(r, group, in, out, schema.Avro, ".amount_cents *= 2")
		inst.Transforms = []string{"jq", "route"}
		inst.Settings["PROCESSOR_ROUTE_EXPR"] = `"` + prefix + `-" + .region`
		inst.OnError, inst.DLQTopic = "dlq", dlq
		p := itest.RunBinary(t, group, inst)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)

		dec := schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{})
		all := map[string][]map[string]any{}
		for topic, id := range ids {
			for k, v := range outputsByID(t, dec, tg.ReadAll(t, topic, true), id) {
				for _, m := range v {
					if m["region"] != strings.TrimPrefix(topic, prefix+"-") {
						t.Errorf("payment %s of region %v was routed to %s", k, m["region"], topic)
					}
				}
				all[k] = append(all[k], v...)
			}
		}
		for i := range n {
			id := "p-" + strconv.Itoa(i)
			want := 1
			if i%3 == 2 {
				want = 0
			}
			if len(all[id]) != want {
				t.Errorf("payment %s output %d times, want %d", id, len(all[id]), want)
			} else if want == 1 && fmt.Sprint(all[id][0]["amount_cents"]) != strconv.Itoa(2*(i+1)) {
				t.Errorf("payment %s: amount %v, want %d", id, all[id][0]["amount_cents"], 2*(i+1))
			}
		}
		if got := tg.ReadAll(t, out, true); len(got) != 0 {
			t.Errorf("%d records in the default output topic, want none", len(got))
		}
		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != n/3 {
			t.Errorf("%d dead letters, want %d (the ap records)", len(dead), n/3)
		}
		for _, d := range dead {
			if st, e := itest.HeaderValue(d, record.HeaderErrorTransform), itest.HeaderValue(d, record.HeaderError); st != "encode" || !strings.Contains(e, prefix+"-ap-value") {
				t.Errorf("dead letter: %s = %q, %s = %q; want encode, naming subject %s-ap-value", record.HeaderErrorTransform, st, record.HeaderError, e, prefix)
			}
		}
	})
}

// The raw boundaries: Avro in and raw out (PROCESSOR_OUTPUT_VALUE_FORMAT=
// raw) writes each value's JSON, with no registry header; raw JSON in and
// Avro out (PROCESSOR_VALUE_FORMAT=raw) encodes each value with the
// output subject's schema, and a value that is not JSON for it fails
// under PROCESSOR_ON_ERROR=dlq at the encode stage, keeping its bytes.
func TestSchemaRawBoundaries(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		const n = 20
		// Avro to JSON.
		in, out, group := itest.Unique("sr-tojson-in"), itest.Unique("sr-tojson-out"), itest.Unique("sr-tojson-group")
		tg.NewTopics(t, 1, in, out)
		enc := r.Encoder(t, r.Register(t, in+"-value", schema.Avro, payV1))
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: in, Value: encode(t, enc, paymentJSON(i))})
		}
		tg.SyncProduce(t, recs...)
		inst := tg.SchemaInstance(r, group, in, out, schema.Avro, "")
		inst.Extra = append(inst.Extra, "PROCESSOR_OUTPUT_VALUE_FORMAT=raw")
		p := itest.RunBinary(t, group, inst)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)
		for i, o := range tg.ReadAll(t, out, true) {
			var got, want any
			if err := json.Unmarshal(o.Value, &got); err != nil || json.Unmarshal([]byte(paymentJSON(i)), &want) != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("output %d: %q (%v), want the JSON %s", i, o.Value, err, paymentJSON(i))
			}
		}

		// JSON to Avro.
		in2, out2, dlq, group2 := itest.Unique("sr-fromjson-in"), itest.Unique("sr-fromjson-out"), itest.Unique("sr-fromjson-dlq"), itest.Unique("sr-fromjson-group")
		tg.NewTopics(t, 1, in2, out2, dlq)
		outSubj := r.Register(t, out2+"-value", schema.Avro, formatCases[0].out)
		var recs2 []*kgo.Record
		for i := range n {
			recs2 = append(recs2, &kgo.Record{Topic: in2, Value: []byte(paymentJSON(i))})
		}
		bad := []byte(`{"id":"p-bad","amount_cents":"many"}`)
		recs2 = append(recs2, &kgo.Record{Topic: in2, Value: bad})
		tg.SyncProduce(t, recs2...)
		inst2 := tg.BinaryInstance(group2, group2+"-1", in2, out2)
		inst2.OnError, inst2.DLQTopic = "dlq", dlq
		inst2.Extra = append(inst2.Extra, "PROCESSOR_OUTPUT_VALUE_FORMAT=avro", "PROCESSOR_SCHEMA_REGISTRY_URL="+r.URL)
		p2 := itest.RunBinary(t, group2, inst2)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group2, in2)
		p2.Terminate(t)
		got := outputsByID(t, schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{}), tg.ReadAll(t, out2, true), outSubj.ID)
		if len(got) != n {
			t.Errorf("%d payments encoded, want %d", len(got), n)
		}
		for i := range n {
			if ms := got["p-"+strconv.Itoa(i)]; len(ms) != 1 || fmt.Sprint(ms[0]["amount_cents"]) != strconv.Itoa(i+1) {
				t.Errorf("payment p-%d: %v, want once with amount %d", i, ms, i+1)
			}
		}
		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != 1 || !bytes.Equal(dead[0].Value, bad) || itest.HeaderValue(dead[0], record.HeaderErrorTransform) != "encode" {
			t.Errorf("%d dead letters, want one holding %q from the encode stage", len(dead), bad)
		}
	})
}

// Schemas with references, input and output: an Avro Order whose total is
// a named type of another subject, and a JSON Schema Order whose total is
// a $ref to another subject's schema. Inputs decode with the reference
// resolved, outputs are encoded with an output subject that references
// it too (jq doubles the units), and an output that breaks the referenced
// schema (units a string) is dead-lettered at the encode stage: the
// reference is enforced, not skipped.
func TestSchemaReferences(t *testing.T) {
	t.Parallel()
	cases := []struct {
		f                 schema.Format
		refName, ref, top string
	}{
		{schema.Avro, "e2e.Money",
			`{"type":"record","name":"Money","namespace":"e2e","fields":[{"name":"currency","type":"string"},{"name":"units","type":"long"}]}`,
			`{"type":"record","name":"Order","namespace":"e2e","fields":[{"name":"id","type":"string"},{"name":"total","type":"e2e.Money"}]}`},
		{schema.JSONSchema, "money.json",
			`{"type":"object","properties":{"currency":{"type":"string"},"units":{"type":"integer"}},"required":["currency","units"]}`,
			`{"type":"object","properties":{"id":{"type":"string"},"total":{"$ref":"money.json"}},"required":["id","total"]}`},
	}
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		for _, c := range cases {
			t.Run(string(c.f), func(t *testing.T) {
				const n = 20
				in, out, dlq, group := itest.Unique("sr-refs-in"), itest.Unique("sr-refs-out"), itest.Unique("sr-refs-dlq"), itest.Unique("sr-refs-group")
				tg.NewTopics(t, 1, in, out, dlq)
				money := r.Register(t, itest.Unique("sr-refs-money"), c.f, c.ref)
				refs := []schema.Reference{{Name: c.refName, Subject: money.Subject, Version: money.Version}}
				ctx := t.Context()
				inSubj, err := r.Reg.Register(ctx, in+"-value", schema.Schema{Type: c.f, Text: c.top, References: refs})
				if err != nil {
					t.Fatal(err)
				}
				outSubj, err := r.Reg.Register(ctx, out+"-value", schema.Schema{Type: c.f, Text: c.top, References: refs})
				if err != nil {
					t.Fatal(err)
				}
				enc := r.Encoder(t, inSubj)
				var recs []*kgo.Record
				for i := range n {
					js := fmt.Sprintf(`{"id":"p-%d","total":{"currency":"EUR","units":%d}}`, i, i+1)
					recs = append(recs, &kgo.Record{Topic: in, Value: encode(t, enc, js)})
				}
				tg.SyncProduce(t, recs...)
				inst := tg.SchemaInstance(r, group, in, out, c.f, `if .id == "p-3" then .total.units = "x" else .total.units *= 2 end`)
				inst.OnError, inst.DLQTopic = "dlq", dlq
				p := itest.RunBinary(t, group, inst)
				tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
				p.Terminate(t)
				got := outputsByID(t, schema.NewDecoder(r.Reg, c.f, schema.DecoderOptions{}), tg.ReadAll(t, out, true), outSubj.ID)
				for i := range n {
					ms := got["p-"+strconv.Itoa(i)]
					want := 1
					if i == 3 {
						want = 0
					}
					if len(ms) != want || (want == 1 && fmt.Sprint(ms[0]["total"]) != fmt.Sprintf("map[currency:EUR units:%d]", 2*(i+1))) {
						t.Errorf("payment p-%d: %v, want %d output(s) with units %d", i, ms, want, 2*(i+1))
					}
				}
				dead := tg.ReadAll(t, dlq, true)
				if len(dead) != 1 || !bytes.Equal(dead[0].Value, recs[3].Value) || itest.HeaderValue(dead[0], record.HeaderErrorTransform) != "encode" {
					t.Errorf("%d dead letters, want one, p-3's, from the encode stage", len(dead))
				}
			})
		}
	})
}
