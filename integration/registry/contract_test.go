package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/srserver"
	"github.com/streamproc/processor/internal/testkit/interop"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/twmb/franz-go/pkg/sr"
)

// The schemas of the contract: v1, v2 (a field added with a default:
// BACKWARD compatible) and bad (a field added without one: not).
const (
	orderV1  = `{"type":"record","name":"Order","namespace":"contract","fields":[{"name":"id","type":"string"}]}`
	orderV1b = `{ "type": "record", "name": "Order", "namespace": "contract",
  "fields": [ { "name": "id", "type": "string" } ] }`
	orderV2  = `{"type":"record","name":"Order","namespace":"contract","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int","default":1}]}`
	orderBad = `{"type":"record","name":"Order","namespace":"contract","fields":[{"name":"id","type":"string"},{"name":"price","type":"long"}]}`

	commonProto = `syntax = "proto3";
package contract.common;
message Money { string currency = 1; int64 units = 2; }
`
	orderProto = `syntax = "proto3";
package contract.orders;
import "contract/common.proto";
message Order { string id = 1; contract.common.Money total = 2; }
`
)

// TestContract runs the registry contract against srserver, and against
// the real registry of PROCESSOR_TEST_SCHEMA_REGISTRY_URL (Apicurio's
// ccompat API, started by .ci/run); without one it is skipped there, and
// fails in CI.
func TestContract(t *testing.T) {
	t.Run("srserver", func(t *testing.T) {
		s, err := srserver.New(srserver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(hs.Close)
		contract(t, hs.URL+srserver.CcompatPrefix)
	})
	t.Run("registry", func(t *testing.T) {
		contract(t, interop.RegistryURL(t))
	})
}

// srCode is the Confluent error code of err, or 0.
func srCode(err error) int {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return 0
}

func wantCode(t *testing.T, what string, err error, code int) {
	t.Helper()
	if got := srCode(err); got != code {
		t.Fatalf("%s: error code %d (%v), want %d", what, got, err, code)
	}
}

// sameJSON: a and b are the same JSON value (a registry may reformat).
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("not JSON: %v: %s", err, a)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

func contract(t *testing.T, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	subj := kafkatest.Unique("orders") + "-value"
	other := kafkatest.Unique("copies") + "-value"
	avro := func(s string) sr.Schema { return sr.Schema{Schema: s, Type: sr.TypeAvro} }

	// Register: an id, version 1; again (even reformatted): the same id, no
	// new version; under another subject: the same id too.
	first, err := cl.CreateSchema(ctx, subj, avro(orderV1))
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	if first.ID < 1 || first.Version != 1 || first.Subject != subj {
		t.Fatalf("register: %+v, want an id, version 1 of %s", first, subj)
	}
	for _, text := range []string{orderV1, orderV1b} {
		id, err := cl.RegisterSchema(ctx, subj, avro(text), -1, -1)
		if err != nil || id != first.ID {
			t.Fatalf("register again: id %d, %v; want %d", id, err, first.ID)
		}
	}
	if vs, err := cl.SubjectVersions(ctx, subj); err != nil || !reflect.DeepEqual(vs, []int{1}) {
		t.Fatalf("versions after registering one schema thrice: %v, %v", vs, err)
	}
	if id, err := cl.RegisterSchema(ctx, other, avro(orderV1), -1, -1); err != nil || id != first.ID {
		t.Fatalf("the same schema under %s: id %d, %v; want %d (one schema, one id)", other, id, err, first.ID)
	}

	// Read it back: latest, by version, by id, by lookup.
	for _, v := range []int{-1, 1} {
		ss, err := cl.SchemaByVersion(ctx, subj, v)
		if err != nil || ss.ID != first.ID || ss.Version != 1 || !sameJSON(t, ss.Schema.Schema, orderV1) {
			t.Fatalf("version %d: %+v, %v", v, ss, err)
		}
	}
	byID, err := cl.SchemaByID(ctx, first.ID)
	if err != nil || byID.Type != sr.TypeAvro || !sameJSON(t, byID.Schema, orderV1) {
		t.Fatalf("by id %d: %+v, %v", first.ID, byID, err)
	}
	if ss, err := cl.LookupSchema(ctx, subj, avro(orderV1)); err != nil || ss.ID != first.ID || ss.Version != 1 {
		t.Fatalf("lookup: %+v, %v", ss, err)
	}
	if subjects, err := cl.Subjects(ctx); err != nil || !contains(subjects, subj) || !contains(subjects, other) {
		t.Fatalf("subjects %v (%v) lack %s or %s", subjects, err, subj, other)
	}

	// Not found, each of its kind.
	_, err = cl.SchemaByVersion(ctx, kafkatest.Unique("none")+"-value", -1)
	wantCode(t, "an unknown subject", err, 40401)
	_, err = cl.SchemaByVersion(ctx, subj, 9)
	wantCode(t, "an unknown version", err, 40402)
	_, err = cl.SchemaByID(ctx, 1<<30)
	wantCode(t, "an unknown id", err, 40403)
	_, err = cl.LookupSchema(ctx, subj, avro(orderV2))
	wantCode(t, "lookup of a schema the subject lacks", err, 40403)
	_, err = cl.RegisterSchema(ctx, subj, avro(`{"type":"record","name":`), -1, -1)
	wantCode(t, "an invalid schema", err, 42201)

	contractCompatibility(ctx, t, cl, subj, first.ID)
	contractReferences(ctx, t, cl)
}

// contractCompatibility: under BACKWARD, a field without a default is
// refused (409) and one with a default accepted as version 2.
func contractCompatibility(ctx context.Context, t *testing.T, cl *sr.Client, subj string, v1 int) {
	avro := func(s string) sr.Schema { return sr.Schema{Schema: s, Type: sr.TypeAvro} }
	res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subj)
	if res[0].Err != nil || res[0].Level != sr.CompatBackward {
		t.Fatalf("set BACKWARD on %s: %+v", subj, res[0])
	}
	if got := cl.Compatibility(ctx, subj); got[0].Err != nil || got[0].Level != sr.CompatBackward {
		t.Fatalf("compatibility of %s: %+v", subj, got[0])
	}
	if c, err := cl.CheckCompatibility(ctx, subj, -1, avro(orderBad)); err != nil || c.Is {
		t.Fatalf("check a field without a default: %+v, %v; want incompatible", c, err)
	}
	if c, err := cl.CheckCompatibility(ctx, subj, -1, avro(orderV2)); err != nil || !c.Is {
		t.Fatalf("check a field with a default: %+v, %v; want compatible", c, err)
	}
	_, err := cl.RegisterSchema(ctx, subj, avro(orderBad), -1, -1)
	wantCode(t, "registering an incompatible schema", err, 409)
	var re *sr.ResponseError
	if errors.As(err, &re) && re.StatusCode != 409 {
		t.Fatalf("incompatible: HTTP %d, want 409", re.StatusCode)
	}
	v2, err := cl.CreateSchema(ctx, subj, avro(orderV2))
	if err != nil || v2.Version != 2 || v2.ID == v1 {
		t.Fatalf("register a compatible version: %+v, %v", v2, err)
	}
	if ss, err := cl.SchemaByVersion(ctx, subj, -1); err != nil || ss.ID != v2.ID || ss.Version != 2 {
		t.Fatalf("latest after v2: %+v, %v", ss, err)
	}
}

// contractReferences: a Protobuf schema importing another subject's.
func contractReferences(ctx context.Context, t *testing.T, cl *sr.Client) {
	common := kafkatest.Unique("contract-common")
	orders := kafkatest.Unique("contract-orders") + "-value"
	c, err := cl.CreateSchema(ctx, common, sr.Schema{Schema: commonProto, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatalf("register the imported schema: %v", err)
	}
	refs := []sr.SchemaReference{{Name: "contract/common.proto", Subject: common, Version: c.Version}}
	o, err := cl.CreateSchema(ctx, orders, sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf, References: refs})
	if err != nil {
		t.Fatalf("register a schema importing it: %v", err)
	}
	if o.ID == c.ID {
		t.Fatalf("both schemas got id %d", o.ID)
	}
	got, err := cl.SchemaByID(ctx, o.ID)
	if err != nil || got.Type != sr.TypeProtobuf || !reflect.DeepEqual(got.References, refs) {
		t.Fatalf("by id %d: %+v, %v; want PROTOBUF with references %+v", o.ID, got, err, refs)
	}
	latest, err := cl.SchemaByVersion(ctx, orders, -1)
	if err != nil || latest.ID != o.ID || !reflect.DeepEqual(latest.References, refs) {
		t.Fatalf("latest of %s: %+v, %v", orders, latest, err)
	}
	missing := []sr.SchemaReference{{Name: "contract/none.proto", Subject: kafkatest.Unique("none"), Version: 1}}
	_, err = cl.RegisterSchema(ctx, kafkatest.Unique("dangling")+"-value",
		sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf, References: missing}, -1, -1)
	if err == nil {
		t.Fatal("a schema whose reference does not exist was registered")
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
