//go:build !wasip1

package guest

// Built natively, the tables are maps of the test process, filled by
// SetTableRow; every name is declared.

var memTables = map[string]map[string][]byte{}

// SetTableRow sets the row of key in table, or deletes it when row is
// nil (a tombstone), for unit tests of a plugin built natively. It exists
// only when built for another platform than wasip1.
func SetTableRow(table string, key, row []byte) {
	if memTables[table] == nil {
		memTables[table] = map[string][]byte{}
	}
	if row == nil {
		delete(memTables[table], string(key))
		return
	}
	memTables[table][string(key)] = append([]byte{}, row...)
}

func tableLookup(table string, key, buf []byte) int32 {
	v, ok := memTables[table][string(key)]
	if !ok {
		return resultNone
	}
	copy(buf, v)
	return int32(len(v))
}
