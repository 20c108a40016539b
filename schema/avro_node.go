package schema

import (
	"fmt"
	"strings"

	"github.com/twmb/avro"
)

// avroKind is the kind of an Avro schema node.
type avroKind uint8

// The Avro kinds.
const (
	avroNull avroKind = iota
	avroBoolean
	avroInt
	avroLong
	avroFloat
	avroDouble
	avroString
	avroBytes
	avroRecord
	avroEnum
	avroArray
	avroMap
	avroUnion
	avroFixed
)

// avroPrimitives maps the primitive type names to their kinds.
var avroPrimitives = map[string]avroKind{
	"null": avroNull, "boolean": avroBoolean, "int": avroInt, "long": avroLong,
	"float": avroFloat, "double": avroDouble, "string": avroString, "bytes": avroBytes,
}

// avroNode is one node of a compiled Avro schema: the tree that
// twmb/avro parsed and validated, with named-type references resolved
// to their nodes (so recursive types are cycles), in the form the
// processor's walk between Avro binary and plain JSON needs.
type avroNode struct {
	kind avroKind
	// typ is the type's name: a named type's full name, else the kind's
	// name (int, string, array...); it is a union branch's key in plain
	// JSON.
	typ      string
	fields   []avroField // record
	symbols  []string    // enum
	items    *avroNode   // array items, map values
	branches []*avroNode // union
	size     int         // fixed

	// A decimal (on bytes or fixed) has its scale and precision.
	decimal          bool
	scale, precision int

	// A nullable union has two branches, one of them null: null is
	// written as null, the other branch as its bare value.
	nullable bool
	nullAt   int // the null branch, or -1
	valueAt  int // a nullable union's other branch
}

// avroField is a record field.
type avroField struct {
	name string
	typ  *avroNode
	// hasDefault: def holds the binary encoding of the default.
	hasDefault bool
	def        []byte
	// raw is the default as twmb/avro gives it, until encoded.
	raw any
}

// avroTree builds avroNodes from twmb/avro's SchemaNode tree.
type avroTree struct {
	named  map[string]*avroNode // by full name
	fields []treeField          // every field with a default, to encode once the tree is whole
}

// treeField is a field with a default and its record.
type treeField struct {
	record *avroNode
	field  *avroField
}

// fullName is a named type's full name.
func fullName(n *avro.SchemaNode) string {
	if strings.Contains(n.Name, ".") || n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "." + n.Name
}

// build returns the node for n; ns is the enclosing namespace, for
// references by short name.
func (t *avroTree) build(n *avro.SchemaNode, ns string) (*avroNode, error) {
	if k, ok := avroPrimitives[n.Type]; ok {
		node := &avroNode{kind: k, typ: n.Type}
		if k == avroBytes && n.LogicalType == "decimal" {
			node.decimal, node.scale, node.precision = true, n.Scale, n.Precision
		}
		return node, nil
	}
	switch n.Type {
	case "record", "error", "enum", "fixed":
		return t.buildNamed(n)
	case "array", "map":
		child := n.Items
		kind := avroArray
		if n.Type == "map" {
			child, kind = n.Values, avroMap
		}
		if child == nil {
			return nil, fmt.Errorf("%s without its %s type", n.Type, map[avroKind]string{avroArray: "items", avroMap: "values"}[kind])
		}
		c, err := t.build(child, ns)
		if err != nil {
			return nil, err
		}
		return &avroNode{kind: kind, typ: n.Type, items: c}, nil
	case "union":
		node := &avroNode{kind: avroUnion, typ: "union", nullAt: -1}
		for i := range n.Branches {
			b, err := t.build(&n.Branches[i], ns)
			if err != nil {
				return nil, err
			}
			if b.kind == avroNull && node.nullAt < 0 {
				node.nullAt = i
			}
			node.branches = append(node.branches, b)
		}
		if len(node.branches) == 2 && node.nullAt >= 0 {
			node.nullable, node.valueAt = true, 1-node.nullAt
		}
		return node, nil
	}
	// A reference to a named type, by full name or by a name in the
	// enclosing namespace.
	if !strings.Contains(n.Type, ".") && ns != "" {
		if node, ok := t.named[ns+"."+n.Type]; ok {
			return node, nil
		}
	}
	if node, ok := t.named[n.Type]; ok {
		return node, nil
	}
	return nil, fmt.Errorf("unknown type %q", n.Type)
}

// buildNamed returns the node of a record, error, enum or fixed,
// registered under its full name before its fields are built, so that a
// record may hold itself.
func (t *avroTree) buildNamed(n *avro.SchemaNode) (*avroNode, error) {
	name := fullName(n)
	node := &avroNode{typ: name}
	t.named[name] = node // before the fields: a record may hold itself
	inner := name[:max(strings.LastIndexByte(name, '.'), 0)]
	switch n.Type {
	case "enum":
		node.kind, node.symbols = avroEnum, n.Symbols
	case "fixed":
		node.kind, node.size = avroFixed, n.Size
		if n.LogicalType == "decimal" {
			node.decimal, node.scale, node.precision = true, n.Scale, n.Precision
		}
	default:
		node.kind = avroRecord
		node.fields = make([]avroField, len(n.Fields))
		for i := range n.Fields {
			f := &n.Fields[i]
			ft, err := t.build(&f.Type, inner)
			if err != nil {
				return nil, err
			}
			node.fields[i] = avroField{name: f.Name, typ: ft, hasDefault: f.HasDefault, raw: f.Default}
		}
		for i := range node.fields {
			if node.fields[i].hasDefault {
				t.fields = append(t.fields, treeField{node, &node.fields[i]})
			}
		}
	}
	return node, nil
}

// compileAvroTree parses text with the named types of refs (schema
// texts, each parsed after those it references) and builds its tree.
// Field defaults are encoded by the caller, once the tree is whole.
func compileAvroTree(text string, refs []string) (*avro.Schema, *avroNode, *avroTree, error) {
	var cache avro.SchemaCache
	for i, r := range refs {
		if _, err := cache.Parse(r); err != nil {
			return nil, nil, nil, &avroRefError{index: i, err: err}
		}
	}
	sch, err := cache.Parse(text)
	if err != nil {
		return nil, nil, nil, err
	}
	t := &avroTree{named: make(map[string]*avroNode)}
	root, err := t.build(sch.Root(), "")
	if err != nil {
		return nil, nil, nil, err
	}
	return sch, root, t, nil
}

// avroRefError is a referenced schema that does not parse.
type avroRefError struct {
	index int // in the references given
	err   error
}

// Error says which reference, by position.
func (e *avroRefError) Error() string { return fmt.Sprintf("reference %d: %v", e.index, e.err) }

// Unwrap gives the parser's error.
func (e *avroRefError) Unwrap() error { return e.err }
