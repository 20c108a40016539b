package schema

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoMainFile is the import path the compiled schema text gets; it is
// not one a reference would use.
const protoMainFile = "registry-schema/main.proto"

// protoCodec maps Protobuf binary to the canonical protojson mapping and
// back, with dynamicpb messages of the compiled schema file.
type protoCodec struct {
	file    protoreflect.FileDescriptor
	message protoreflect.MessageDescriptor // the one Encode writes
	msgIdx  []int                          // its message-index list
	marshal protojson.MarshalOptions
	parse   protojson.UnmarshalOptions
}

// compileProtobuf compiles s with protocompile, its imports from refs
// (by reference name) and the well-known types (google/protobuf/*.proto,
// from the Go protobuf registry); message names the message Encode
// writes (empty: the file's first). The schema and each reference may be
// .proto source or a base64 FileDescriptorProto, the form Confluent's
// Protobuf serializers register (protoDescriptor tells them apart): a
// descriptor is linked as it is, source is parsed first.
func compileProtobuf(ctx context.Context, s Schema, refs []namedSchema, message string) (codec, error) {
	texts := map[string]string{protoMainFile: s.Text}
	descs := map[string]*descriptorpb.FileDescriptorProto{}
	var err error
	if descs[protoMainFile], err = protoDescriptor(protoMainFile, s.Text); err != nil {
		return nil, err
	}
	for _, r := range refs {
		if r.schema.Type != Protobuf {
			return nil, fmt.Errorf("reference %q is a %s schema, not protobuf", r.name, r.schema.Type)
		}
		texts[r.name] = r.schema.Text
		if descs[r.name], err = protoDescriptor(r.name, r.schema.Text); err != nil {
			return nil, fmt.Errorf("reference %q: %w", r.name, err)
		}
	}
	comp := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
			text, ok := texts[path]
			switch {
			case !ok:
				return protocompile.SearchResult{}, fmt.Errorf("import %q is neither a reference of the schema nor a well-known type", path)
			case descs[path] != nil:
				return protocompile.SearchResult{Proto: descs[path]}, nil
			}
			return protocompile.SearchResult{Source: strings.NewReader(text)}, nil
		})),
	}
	compiled, err := comp.Compile(ctx, protoMainFile)
	if err != nil {
		return nil, err
	}
	fd := compiled[0]
	c := &protoCodec{
		file:    fd,
		marshal: protojson.MarshalOptions{},
		parse:   protojson.UnmarshalOptions{DiscardUnknown: false},
	}
	if fd.Messages().Len() == 0 {
		return nil, fmt.Errorf("the schema defines no message")
	}
	if message == "" {
		c.message, c.msgIdx = fd.Messages().Get(0), []int{0}
		return c, nil
	}
	c.message, c.msgIdx = findMessage(fd.Messages(), protoreflect.FullName(message), nil)
	if c.message == nil {
		return nil, fmt.Errorf("the schema has no message %q (give the full name, package.Message)", message)
	}
	return c, nil
}

// protoDescriptor returns the descriptor of the file imported as name
// whose registry text is text when text is a base64 FileDescriptorProto,
// the serialized form Confluent's serializers register (a text of the
// base64 alphabet alone, which .proto source never is: every definition
// needs braces or a semicolon), renamed to name so that it is found
// under the import path its importers use; nil when text is .proto
// source.
func protoDescriptor(name, text string) (*descriptorpb.FileDescriptorProto, error) {
	t := strings.TrimSpace(text)
	if t == "" || strings.TrimLeft(t, base64Alphabet) != "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(t)
	if err != nil {
		return nil, fmt.Errorf("the schema is neither .proto source nor a base64 FileDescriptorProto: %w", err)
	}
	fdp := &descriptorpb.FileDescriptorProto{}
	if err := proto.Unmarshal(b, fdp); err != nil {
		return nil, fmt.Errorf("the schema is base64 but not a FileDescriptorProto: %w", err)
	}
	fdp.Name = proto.String(name)
	return fdp, nil
}

// base64Alphabet is the standard base64 alphabet with its padding.
const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="

// findMessage looks name up among msgs and their nested messages, and
// returns it with its message-index list.
func findMessage(msgs protoreflect.MessageDescriptors, name protoreflect.FullName, path []int) (protoreflect.MessageDescriptor, []int) {
	for i := 0; i < msgs.Len(); i++ {
		m := msgs.Get(i)
		p := append(append([]int(nil), path...), i)
		if m.FullName() == name {
			return m, p
		}
		if found, fp := findMessage(m.Messages(), name, p); found != nil {
			return found, fp
		}
	}
	return nil, nil
}

// index returns the message-index list of the message Encode writes.
func (c *protoCodec) index() []int { return c.msgIdx }

// byIndex returns the message a header's message-index list names.
func (c *protoCodec) byIndex(index []int) (protoreflect.MessageDescriptor, error) {
	if len(index) == 0 {
		index = []int{0}
	}
	msgs := c.file.Messages()
	var m protoreflect.MessageDescriptor
	for _, i := range index {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v is not a message of the schema", index)
		}
		m = msgs.Get(i)
		msgs = m.Messages()
	}
	return m, nil
}

// decode unmarshals payload as the message the index names and appends
// its protojson form.
func (c *protoCodec) decode(payload []byte, index []int, dst []byte) ([]byte, error) {
	md, err := c.byIndex(index)
	if err != nil {
		return dst, err
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(payload, m); err != nil {
		return dst, fmt.Errorf("message %s: %w", md.FullName(), err)
	}
	out, err := c.marshal.MarshalAppend(dst, m)
	if err != nil {
		return dst, fmt.Errorf("message %s: %w", md.FullName(), err)
	}
	return out, nil
}

// encode parses js as protojson of the Encoder's message (unknown
// fields are an error) and appends its binary form.
func (c *protoCodec) encode(dst, js []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(c.message)
	if err := c.parse.Unmarshal(js, m); err != nil {
		return dst, misfit("message %s: %v", c.message.FullName(), err)
	}
	out, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
	if err != nil {
		return dst, misfit("message %s: %v", c.message.FullName(), err)
	}
	return out, nil
}
