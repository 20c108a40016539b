package srserver

import (
	"strings"

	"github.com/twmb/avro"
)

// avroReads reports whether data written with writer can be read with
// reader, as the Avro specification's resolution rules and Java's
// SchemaCompatibility (Confluent's and Apicurio's registries) have it:
// twmb/avro's CheckCompatibility, and one rule more. twmb/avro lends a
// reader field whose union begins with null an implicit null default;
// the specification does not, so such a field that the writer lacks and
// that has no default of its own is an incompatibility here, as it was
// before the move to twmb/avro.
func avroReads(writer, reader *avro.Schema) error {
	if err := avro.CheckCompatibility(writer, reader); err != nil {
		return err
	}
	r, w := reader.Root().ExpandReferences(), writer.Root().ExpandReferences()
	return missingDefault(r, w, "", make(map[[2]*avro.SchemaNode]bool))
}

// missingDefault walks reader and writer nodes as resolution pairs them
// and returns the first reader field that the writer lacks and that has
// no explicit default. References left by ExpandReferences (recursive
// types) end the walk there: they pair records already walked.
func missingDefault(r, w *avro.SchemaNode, path string, seen map[[2]*avro.SchemaNode]bool) error {
	if seen[[2]*avro.SchemaNode{r, w}] {
		return nil
	}
	seen[[2]*avro.SchemaNode{r, w}] = true
	if w.Type == "union" {
		for i := range w.Branches {
			if err := missingDefault(r, &w.Branches[i], path, seen); err != nil {
				return err
			}
		}
		return nil
	}
	if r.Type == "union" {
		for i := range r.Branches {
			if b := &r.Branches[i]; b.Type == w.Type && (b.Type != "record" || sameRecord(b, w)) {
				return missingDefault(b, w, path, seen)
			}
		}
		return nil
	}
	switch {
	case r.Type != w.Type:
		return nil
	case r.Type == "array":
		return missingDefault(r.Items, w.Items, path, seen)
	case r.Type == "map":
		return missingDefault(r.Values, w.Values, path, seen)
	case r.Type != "record" && r.Type != "error":
		return nil
	}
	if path == "" {
		path = r.Name
	}
	for i := range r.Fields {
		rf := &r.Fields[i]
		wf := writerField(rf, w)
		p := path + "." + rf.Name
		if wf == nil {
			if !rf.HasDefault {
				return &avro.CompatibilityError{Path: p, ReaderType: rf.Type.Type, WriterType: "<missing>",
					Detail: "reader field has no default and is missing from writer"}
			}
			continue
		}
		if err := missingDefault(&rf.Type, &wf.Type, p, seen); err != nil {
			return err
		}
	}
	return nil
}

// sameRecord reports whether two records have one name (full, or
// unqualified as Java's union resolution also allows).
func sameRecord(a, b *avro.SchemaNode) bool {
	short := func(n *avro.SchemaNode) string { return n.Name[strings.LastIndexByte(n.Name, '.')+1:] }
	return a.Name == b.Name && a.Namespace == b.Namespace || short(a) == short(b)
}

// writerField returns the writer's field that reader field rf reads: by
// its name, else by one of its aliases.
func writerField(rf *avro.SchemaField, w *avro.SchemaNode) *avro.SchemaField {
	for _, name := range append([]string{rf.Name}, rf.Aliases...) {
		for i := range w.Fields {
			if w.Fields[i].Name == name {
				return &w.Fields[i]
			}
		}
	}
	return nil
}
