package topics

import (
	"strings"
	"testing"
)

func TestInternerAllocatesOnce(t *testing.T) {
	var in Interner
	b := []byte("orders-eu")
	if s := in.String(b); s != "orders-eu" {
		t.Fatalf("String = %q", s)
	}
	if n := testing.AllocsPerRun(100, func() { _ = in.String(b) }); n != 0 {
		t.Errorf("a seen string allocates %v times, want 0", n)
	}
	for i := range maxInterned + 10 {
		_ = in.String([]byte(strings.Repeat("x", i%300) + string(rune('a'+i%26))))
	}
	if len(in.m) > maxInterned {
		t.Errorf("interned %d strings, want at most %d", len(in.m), maxInterned)
	}
}

// An Interner keeps no string longer than maxLen, so the strings it keeps
// for good (a wasm guest's header keys, say) take at most maxInterned *
// maxLen bytes, however long each is.
func TestInternerBoundedInBytes(t *testing.T) {
	var in Interner
	long := []byte(strings.Repeat("k", 1<<20))
	for i := range 10 {
		long[0] = byte('a' + i)
		if s := in.String(long); s != string(long) {
			t.Fatal("String changed the string")
		}
	}
	var kept int
	for s := range in.m {
		kept += len(s)
	}
	if kept > maxInterned*maxLen {
		t.Errorf("the interner keeps %d bytes, want at most %d", kept, maxInterned*maxLen)
	}
	if s := strings.Repeat("t", 249); in.String([]byte(s)) != s || in.m[s] != s {
		t.Errorf("a topic name of the longest valid length is not interned")
	}
}
