package wasm

// maxTable bounds the entries of the table a module declares. wazero
// allocates a table in full when it instantiates a module, eight bytes an
// entry, at whatever size the module declares (up to 2^27 entries: 1 GiB
// per instance, outside its MAX_MEMORY). A Go guest's table
// holds the functions it calls indirectly: a few thousand.
const maxTable = 1 << 20

// tableSize returns the initial size of the table module bin defines in
// its table section, 0 when it defines none. It reads only the section's
// structure and is meant for a module wazero has compiled, and so
// validated, with reference types off: such a module has at most one
// table, and nothing grows a table past its initial size. What it cannot
// read counts as no table.
func tableSize(bin []byte) uint64 {
	const tableSection = 4
	if len(bin) < 8 {
		return 0
	}
	b := bin[8:] // magic and version
	for len(b) > 0 {
		id := b[0]
		size, n := uleb(b[1:])
		if n == 0 || size > uint64(len(b)-1-n) {
			return 0
		}
		payload := b[1+n : 1+n+int(size)]
		b = b[1+n+int(size):]
		if id == tableSection {
			return firstTable(payload)
		}
	}
	return 0
}

// firstTable reads the first table type of a table section: after the
// count, an optional 0x40 0x00 prefix (a table with an initializer
// expression, which follows the limits), a reference type (one byte, or
// 0x63 or 0x64 and a heap type), then the limits: a flag byte and the
// initial size.
func firstTable(p []byte) uint64 {
	count, n := uleb(p)
	if n == 0 || count == 0 {
		return 0
	}
	p = p[n:]
	if len(p) >= 2 && p[0] == 0x40 && p[1] == 0x00 {
		p = p[2:]
	}
	if len(p) == 0 {
		return 0
	}
	ref := p[0]
	p = p[1:]
	if ref == 0x63 || ref == 0x64 { // (ref null ht), (ref ht)
		if _, n = uleb(p); n == 0 { // a signed LEB128: the same length
			return 0
		}
		p = p[n:]
	}
	if len(p) < 2 {
		return 0
	}
	size, _ := uleb(p[1:]) // after the limits' flag
	return size
}

// uleb decodes the unsigned LEB128 number of up to 64 bits that b starts
// with, and returns it and its length in bytes; a length of 0 means b
// does not start with one.
func uleb(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
