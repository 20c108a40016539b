// Command enrichjoin is an example WebAssembly transform for the
// processor's wasm transform that reads a table topic: for each record,
// keyed by a customer id, whose value is a JSON object such as
//
//	{"order":7,"customer":"c1"}
//
// it looks the record key up in the customers table and writes the
// value with the customer's row added as "row", or null when the table
// has no row of the key (a left join):
//
//	{"order":7,"customer":"c1","row":{"name":"Ann"}}
//
// The table is declared in the wasm transform's settings, and the
// processor keeps it as it keeps the join transform's table
// (docs/joins.md):
//
//	PROCESSOR_TRANSFORMS=wasm
//	PROCESSOR_WASM_MODULE=bin/plugins/enrichjoin.wasm
//	PROCESSOR_WASM_TABLES=customers
//	PROCESSOR_WASM_TABLE_MODE=co_partitioned   # or global
//
// The table's name is Table, "customers" unless set at build time:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -ldflags "-X main.Table=crm.customers" -o bin/plugins/enrichjoin.wasm ./examples/wasm/enrichjoin
package main

import (
	"bytes"
	"errors"

	"github.com/streamproc/processor/transform/wasm/guest"
)

// Table is the table topic the records' keys are looked up in.
var Table = "customers"

func init() { guest.Handle(Enrich) }

var (
	out = make([]guest.Record, 1) // returned by every call
	buf []byte                    // the new value, reused
	row = make([]byte, 0, 256)    // the row, reused
)

// errNotObject fails a record whose value is not a JSON object.
var errNotObject = errors.New("the value is not a JSON object")

// Enrich adds the row of the record key in Table to the record's value.
func Enrich(in guest.Record) ([]guest.Record, error) {
	v := bytes.TrimRight(in.Value, " \t\r\n")
	if len(v) < 2 || v[0] != '{' || v[len(v)-1] != '}' {
		return nil, errNotObject
	}
	r, ok, err := guest.AppendLookup(row[:0], Table, in.Key)
	if err != nil {
		return nil, err
	}
	row = r
	buf = append(buf[:0], v[:len(v)-1]...)
	if len(bytes.TrimSpace(buf)) > 1 {
		buf = append(buf, ',')
	}
	buf = append(buf, `"row":`...)
	if ok {
		buf = append(buf, r...)
	} else {
		buf = append(buf, "null"...)
	}
	in.Value = append(buf, '}')
	out[0] = in
	return out, nil
}

func main() {}
