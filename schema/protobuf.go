package schema

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
// (by reference name) and the well-known types; message names the
// message Encode writes (empty: the file's first).
func compileProtobuf(ctx context.Context, s Schema, refs []namedSchema, message string) (codec, error) {
	sources := map[string]string{protoMainFile: s.Text}
	for _, r := range refs {
		if r.schema.Type != Protobuf {
			return nil, fmt.Errorf("reference %q is a %s schema, not protobuf", r.name, r.schema.Type)
		}
		sources[r.name] = r.schema.Text
	}
	comp := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: func(path string) (io.ReadCloser, error) {
				text, ok := sources[path]
				if !ok {
					return nil, fmt.Errorf("import %q is neither a reference of the schema nor a well-known type", path)
				}
				return io.NopCloser(strings.NewReader(text)), nil
			},
		}),
	}
	files, err := comp.Compile(ctx, protoMainFile)
	if err != nil {
		return nil, err
	}
	fd := files[0]
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
