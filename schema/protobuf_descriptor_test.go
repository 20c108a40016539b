package schema_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/schematest"
)

// descriptorText is the registry text Confluent's Protobuf serializers
// register for the .proto source text imported as name (with imports
// among the others of sources and the well-known types): the file's
// FileDescriptorProto, serialized and base64-encoded.
func descriptorText(t testing.TB, name string, sources map[string]string) string {
	t.Helper()
	comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) {
			text, ok := sources[path]
			if !ok {
				return nil, fmt.Errorf("no file %q", path)
			}
			return io.NopCloser(strings.NewReader(text)), nil
		},
	})}
	files, err := comp.Compile(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(protodesc.ToFileDescriptorProto(files[0]))
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// randomOrder is a random shop.v1.Order of orderProto as protojson, its
// 64-bit integers across their whole range (beyond 2^53 included).
func randomOrder(r *rand.Rand) string {
	i64 := func() int64 {
		switch r.IntN(4) {
		case 0:
			return []int64{math.MinInt64, math.MaxInt64, 1 << 53, 1<<53 + 1, -(1<<53 + 1), 0}[r.IntN(6)]
		case 1:
			return r.Int64N(1000) - 500
		}
		return int64(r.Uint64())
	}
	var lines []string
	for range r.IntN(3) {
		lines = append(lines, fmt.Sprintf(`{"sku":"s%d","count":%d}`, r.IntN(100), r.Uint32()))
	}
	return fmt.Sprintf(`{"id":"o-%d-é😀","amountCents":"%d","created":"%s","lines":[%s],"total":{"currency":"EUR","units":"%d"},"status":"%s"}`,
		r.IntN(1e6), i64(), fmt.Sprintf("20%02d-01-02T03:04:%02d.%03dZ", r.IntN(80)+10, r.IntN(60), r.IntN(1000)),
		strings.Join(lines, ","), i64(), []string{"NEW", "PAID"}[r.IntN(2)])
}

// TestProtobufDescriptorForm holds the base64 FileDescriptorProto form of
// a schema and its reference (as Confluent's serializers register them)
// to the .proto source form, the reference: for random Orders (64-bit
// values at and beyond 2^53, a well-known type, nested and repeated
// messages, an enum) and a nested message chosen by name, every mix of
// forms (descriptor schema with a descriptor or a source reference,
// source schema with a descriptor reference) encodes to the payload the
// source form writes, with the same message indexes, and decodes it to
// the same JSON, byte for byte.
func TestProtobufDescriptorForm(t *testing.T) {
	ctx := context.Background()
	sources := map[string]string{"money.proto": moneyProto, "order.proto": orderProto}
	orderDesc, moneyDesc := descriptorText(t, "order.proto", sources), descriptorText(t, "money.proto", sources)
	reg, text := protoRegistry(t)
	reg.MustRegister("money-desc", schema.Schema{Type: schema.Protobuf, Text: moneyDesc})
	ref := func(subject string) []schema.Reference {
		return []schema.Reference{{Name: "money.proto", Subject: subject, Version: 1}}
	}
	forms := map[string]schema.Subject{
		"descriptor, descriptor reference": reg.MustRegister("o-dd", schema.Schema{Type: schema.Protobuf, Text: orderDesc, References: ref("money-desc")}),
		"descriptor, source reference":     reg.MustRegister("o-ds", schema.Schema{Type: schema.Protobuf, Text: orderDesc, References: ref("money")}),
		"source, descriptor reference":     reg.MustRegister("o-sd", schema.Schema{Type: schema.Protobuf, Text: orderProto, References: ref("money-desc")}),
	}
	dec := schema.NewDecoder(reg, schema.Protobuf, schema.DecoderOptions{})
	r := rand.New(rand.NewPCG(39, 3))
	for _, msg := range []string{"", "shop.v1.Refund.Reason"} {
		want, err := schema.NewEncoder(ctx, reg, text, schema.EncoderOptions{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		for name, sub := range forms {
			enc, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{Message: msg})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i := range 200 {
				js := `{"text":"reason ` + fmt.Sprint(i) + `"}`
				if msg == "" {
					js = randomOrder(r)
				}
				b, wb := mustEncode(t, enc, js), mustEncode(t, want, js)
				if !bytes.Equal(b[5:], wb[5:]) {
					t.Fatalf("%s, %s: payload %x, the source form's %x", name, js, b[5:], wb[5:])
				}
				if got, w := mustDecode(t, dec, b), mustDecode(t, dec, wb); got != w {
					t.Fatalf("%s: decodes %s as %s, the source form as %s", name, js, got, w)
				}
			}
		}
	}
}

// TestProtobufDescriptorFaults: a schema text of the base64 alphabet
// that does not decode, or decodes to something that is not a
// FileDescriptorProto, does not compile and says why; a descriptor
// importing a file that is neither a reference nor a well-known type
// names the import.
func TestProtobufDescriptorFaults(t *testing.T) {
	ctx := context.Background()
	reg := schematest.NewMemory()
	lonely := &descriptorpb.FileDescriptorProto{Name: proto.String("x.proto"), Syntax: proto.String("proto3"),
		Dependency:  []string{"absent.proto", "google/protobuf/timestamp.proto"},
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M")}}}
	lb, err := proto.Marshal(lonely)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ text, want string }{
		{"Zm9v!", "syntax error"}, // not the alphabet: read as source
		{"AAA", "neither .proto source nor a base64 FileDescriptorProto"}, // bad length
		{"AAAA", "base64 but not a FileDescriptorProto"},                  // field number 0
		{base64.StdEncoding.EncodeToString(lb), `"absent.proto"`},
	} {
		sub := reg.MustRegister("s-"+tc.text[:3], schema.Schema{Type: schema.Protobuf, Text: tc.text})
		_, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{})
		wantFault(t, err, schema.FaultSchema, "does not compile", tc.want)
	}
}
