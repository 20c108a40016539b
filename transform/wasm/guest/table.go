package guest

import "errors"

// ErrTable: the host's lookup failed (a table not declared in the wasm
// transform's TABLES setting, say); the host fails the record with its
// own error, which says why.
var ErrTable = errors.New("guest: the table lookup failed (the host fails the record with the reason)")

// tableScratch is the buffer Lookup reads into first, grown to the
// largest row read; rows are then copied out of it.
var tableScratch = make([]byte, 256)

// Lookup returns a copy of the row of key in the table topic table, or
// ok false when the key has no row (never written, or deleted by a
// tombstone). The table must be declared in the wasm transform's TABLES
// setting (PROCESSOR_WASM_TABLES=customers): the processor keeps it as it
// keeps the join transform's table (docs/joins.md), and a record sees it
// as this instance has read it when the record is processed, the latest
// row per key by offset. Co-partitioned (TABLE_MODE, the default), the
// row is of the table partition of the record's input partition; global,
// of the whole table.
//
// Use Lookup only from the Func that Handle registered, while it runs.
// A lookup the host fails (an undeclared table, one not restored) fails
// the record whatever the Func returns; Lookup then returns ErrTable, so
// the Func can stop early.
//
// Built for another platform than wasip1 (unit tests of a plugin's
// logic, run natively), the tables are those SetTableRow fills.
func Lookup(table string, key []byte) (row []byte, ok bool, err error) {
	v, ok, err := AppendLookup(tableScratch[:0], table, key)
	if cap(v) > cap(tableScratch) {
		tableScratch = v[:0]
	}
	if !ok || err != nil {
		return nil, ok, err
	}
	return append([]byte(nil), v...), true, nil
}

// AppendLookup appends the row of key in table to dst and returns the
// extended buffer, or dst and ok false when the key has no row. The host
// writes the row straight into dst's spare capacity when it fits;
// otherwise dst is grown and the host asked again.
func AppendLookup(dst []byte, table string, key []byte) (row []byte, ok bool, err error) {
	for {
		spare := dst[len(dst):cap(dst)]
		n := tableLookup(table, key, spare)
		switch {
		case n == resultNone:
			return dst, false, nil
		case n < 0:
			return dst, false, ErrTable
		case int(n) <= len(spare):
			return dst[:len(dst)+int(n)], true, nil
		}
		grown := make([]byte, len(dst), len(dst)+int(n))
		copy(grown, dst)
		dst = grown
	}
}
