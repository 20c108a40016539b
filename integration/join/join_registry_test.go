package join

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/srserver"
	"github.com/streamproc/processor/internal/testkit/interop"
	"github.com/streamproc/processor/internal/testkit/itest"
	"github.com/streamproc/processor/schema"
)

// The Avro schemas of the registry join: the orders and the customers
// table, each under its topic's subject.
const (
	orderAvro    = `{"type":"record","name":"Order","namespace":"joins","fields":[{"name":"order","type":"long"},{"name":"customer","type":"string"}]}`
	customerAvro = `{"type":"record","name":"Customer","namespace":"joins","fields":[{"name":"name","type":"string"},{"name":"tier","type":"int"},{"name":"vip","type":["null","boolean"],"default":null}]}`
)

// A table whose rows are Avro in the Schema Registry's wire format, as
// the orders are (PROCESSOR_VALUE_FORMAT=avro): the join decodes each row
// as it decodes the inputs, so an order carries its customer's row as
// JSON, union and all; raw output writes the chain's JSON. Against the
// in-process registry and, when PROCESSOR_TEST_SCHEMA_REGISTRY_URL is
// set, the project's real one.
func TestJoinRegistryTable(t *testing.T) {
	t.Parallel()
	registries := map[string]string{}
	srv, err := srserver.New(srserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	url, err := srv.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	registries["srserver"] = url
	if u := os.Getenv(interop.RegistryVar); u != "" {
		registries["registry"] = u
	}
	for name, url := range registries {
		t.Run(name, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{url}})
				if err != nil {
					t.Fatal(err)
				}
				r := &itest.SREnv{Name: name, URL: url, Reg: reg}
				joinRegistryTable(t, tg, r)
			})
		})
	}
}

func joinRegistryTable(t *testing.T, tg *itest.Target, r *itest.SREnv) {
	in, table, out, group := itest.Unique("avro-orders"), itest.Unique("avro-customers"), itest.Unique("avro-enriched"), itest.Unique("avro-join")
	tg.NewTopics(t, 3, in, out)
	tg.CreateTopicWithConfigs(t, 3, map[string]string{"cleanup.policy": "compact"}, table)
	orders := r.Encoder(t, r.Register(t, in+"-value", schema.Avro, orderAvro))
	customers := r.Encoder(t, r.Register(t, table+"-value", schema.Avro, customerAvro))
	const nCustomers, nOrders = 6, 60
	want := map[string]map[string]any{} // customer -> its row as JSON
	var rows []*kgo.Record
	for i := range nCustomers - 1 { // the last customer has no row
		c := "c" + strconv.Itoa(i)
		js := fmt.Sprintf(`{"name":"n%d","tier":%d,"vip":%s}`, i, i*10, map[bool]string{true: "true", false: "null"}[i%2 == 0])
		v, err := customers.Encode(nil, []byte(js))
		if err != nil {
			t.Fatalf("encoding %s: %v", js, err)
		}
		rows = append(rows, &kgo.Record{Topic: table, Key: []byte(c), Value: v})
		var vip any
		if i%2 == 0 {
			vip = true
		}
		want[c] = map[string]any{"name": "n" + strconv.Itoa(i), "tier": float64(i * 10), "vip": vip}
	}
	tg.SyncProduce(t, rows...)
	var recs []*kgo.Record
	for i := range nOrders {
		c := "c" + strconv.Itoa(i%nCustomers)
		v, err := orders.Encode(nil, fmt.Appendf(nil, `{"order":%d,"customer":%q}`, i, c))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(c), Value: v})
	}
	tg.SyncProduce(t, recs...)

	p := tg.StartBinary(t, group, group+"-1", in, out, func(inst *launch.Instance) {
		inst.Transforms = []string{"join"}
		inst.Settings = map[string]string{"PROCESSOR_JOIN_TABLE": table, "PROCESSOR_JOIN_INTO": ".row", "PROCESSOR_JOIN_TYPE": "left"}
		inst.Extra = append(inst.Extra, "PROCESSOR_STATE_DIR="+t.TempDir(), "PROCESSOR_VALUE_FORMAT=avro",
			"PROCESSOR_SCHEMA_REGISTRY_URL="+r.URL, "PROCESSOR_OUTPUT_VALUE_FORMAT=raw")
	})
	tg.WaitCaughtUp(t, group, in)
	p.Terminate(t)

	seen := map[float64]bool{}
	for _, rec := range tg.ReadAll(t, out, true) {
		var v struct {
			Order    float64        `json:"order"`
			Customer string         `json:"customer"`
			Row      map[string]any `json:"row"`
		}
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatalf("output %q is not the chain's JSON: %v", rec.Value, err)
		}
		if seen[v.Order] {
			t.Errorf("order %v written twice", v.Order)
		}
		seen[v.Order] = true
		if w := want[v.Customer]; !reflect.DeepEqual(v.Row, w) {
			t.Errorf("order %v of %s carries row %v, want %v", v.Order, v.Customer, v.Row, w)
		}
	}
	if len(seen) != nOrders {
		t.Errorf("%d orders written, want %d", len(seen), nOrders)
	}
}
