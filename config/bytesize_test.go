package config

import "testing"

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"64MiB": 64 << 20, "512KiB": 512 << 10, "1GiB": 1 << 30, "4GiB": 4 << 30, "1048576": 1 << 20, "100B": 100, " 2 MiB ": 2 << 20} {
		var b ByteSize
		if err := b.Decode(in); err != nil || b != want {
			t.Errorf("Decode(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1MiB", "1.5GiB", "64MB", "99999999999999GiB"} {
		var b ByteSize
		if err := b.Decode(in); err == nil {
			t.Errorf("Decode(%q) = %d, want an error", in, b)
		}
	}
	for b, want := range map[ByteSize]string{64 << 20: "64MiB", 1 << 30: "1GiB", 1536: "1536B", 1000: "1000B", 0: "0B"} {
		if got := b.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint64(b), got, want)
		}
	}
}
