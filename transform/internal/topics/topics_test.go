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
