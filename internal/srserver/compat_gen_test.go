package srserver

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// compatTypes are field types for random schema evolutions: promotions,
// enums with and without a default, fixed sizes, nested records (in
// unions, arrays and maps) that gain fields with and without defaults,
// nullable unions without defaults.
var compatTypes = []string{`"int"`, `"long"`, `"float"`, `"double"`, `"string"`, `"bytes"`, `"boolean"`,
	`["null","string"]`, `["null","int"]`, `["int","string"]`, `["null","long","string"]`,
	`{"type":"enum","name":"E","symbols":["A","B"]}`, `{"type":"enum","name":"E","symbols":["A","B","C"]}`,
	`{"type":"enum","name":"E","symbols":["A","B","C"],"default":"A"}`,
	`{"type":"array","items":"int"}`, `{"type":"array","items":"long"}`, `{"type":"map","values":"string"}`,
	`{"type":"fixed","name":"F","size":4}`, `{"type":"fixed","name":"F","size":8}`,
	`{"type":"record","name":"In","fields":[{"name":"x","type":"int"}]}`,
	`{"type":"record","name":"In","fields":[{"name":"x","type":"int"},{"name":"y","type":"string","default":"d"}]}`,
	`{"type":"record","name":"In","fields":[{"name":"x","type":"long"}]}`,
	`{"type":"record","name":"In","fields":[{"name":"x","type":"int"},{"name":"z","type":["null","string"]}]}`,
	`{"type":"record","name":"In","fields":[{"name":"x","type":"int"},{"name":"z","type":["null","string"],"aliases":["y"]}]}`,
	`["null",{"type":"record","name":"In","fields":[{"name":"x","type":"int"}]}]`,
	`["null",{"type":"record","name":"In","fields":[{"name":"x","type":"int"},{"name":"z","type":["null","string"]}]}]`,
	`["null","string",{"type":"record","name":"In","fields":[{"name":"x","type":"int"},{"name":"z","type":["null","long"]}]}]`,
	`{"type":"array","items":{"type":"record","name":"In","fields":[{"name":"x","type":"int"},{"name":"z","type":["null","string"]}]}}`,
	`{"type":"array","items":{"type":"record","name":"In","fields":[{"name":"x","type":"int"}]}}`,
	`{"type":"map","values":{"type":"record","name":"In","fields":[{"name":"x","type":"int"},{"name":"z","type":["null","string","int"]}]}}`,
	`{"type":"map","values":{"type":"record","name":"In","fields":[{"name":"x","type":"int"}]}}`,
	`{"type":"map","values":["null","long"]}`}

// compatDefaults are defaults for some of compatTypes.
var compatDefaults = map[string]string{`"int"`: "1", `"long"`: "2", `"float"`: "1.5", `"double"`: "2.5", `"string"`: `"s"`, `"bytes"`: `"b"`,
	`"boolean"`: "true", `["null","string"]`: "null", `["null","int"]`: "null", `["int","string"]`: "3", `["null","long","string"]`: "null",
	`{"type":"array","items":"int"}`: "[]", `{"type":"map","values":"string"}`: "{}"}

// compatPair returns a random record schema (the writer) and an
// evolution of it (the reader): a field changed, added or dropped.
func compatPair(seed uint64) (writer, reader string) {
	rng := rand.New(rand.NewPCG(seed, 11))
	field := func(name string) string {
		typ := compatTypes[rng.IntN(len(compatTypes))]
		if d, ok := compatDefaults[typ]; ok && rng.IntN(2) == 0 {
			return fmt.Sprintf(`{"name":%q,"type":%s,"default":%s}`, name, typ, d)
		}
		return fmt.Sprintf(`{"name":%q,"type":%s}`, name, typ)
	}
	a := make([]string, 1+rng.IntN(3))
	for i := range a {
		a[i] = field(fmt.Sprintf("f%d", i))
	}
	b := append([]string(nil), a...)
	switch rng.IntN(3) {
	case 0:
		i := rng.IntN(len(b))
		b[i] = field(fmt.Sprintf("f%d", i))
	case 1:
		b = append(b, field("g"))
	default:
		b = b[1:]
	}
	return `{"type":"record","name":"R","fields":[` + strings.Join(a, ",") + `]}`,
		`{"type":"record","name":"R","fields":[` + strings.Join(b, ",") + `]}`
}
