package bytesize

import (
	"fmt"
	"math"
	"testing"
)

func TestDecodeAndString(t *testing.T) {
	for in, want := range map[string]Size{"64MiB": 64 << 20, "512KiB": 512 << 10, "1GiB": 1 << 30, "4GiB": 4 << 30, "1048576": 1 << 20, "100B": 100, " 2 MiB ": 2 << 20} {
		var b Size
		if err := b.UnmarshalText([]byte(in)); err != nil || b != want {
			t.Errorf("UnmarshalText(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1MiB", "1.5GiB", "64MB", "99999999999999GiB"} {
		var b Size
		if err := b.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("UnmarshalText(%q) = %d, want an error", in, b)
		}
	}
	for b, want := range map[Size]string{64 << 20: "64MiB", 1 << 30: "1GiB", 1536: "1536B", 1000: "1000B", 0: "0B"} {
		if got := b.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint64(b), got, want)
		}
	}
}

// The largest size that fits in an int64 is accepted in every unit; one
// more is refused.
func TestLimits(t *testing.T) {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"B", 1}, {"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		largest := uint64(math.MaxInt64) / u.mult
		var b Size
		in := fmt.Sprintf("%d%s", largest, u.suffix)
		if err := b.UnmarshalText([]byte(in)); err != nil || uint64(b) != largest*u.mult {
			t.Errorf("UnmarshalText(%q) = %d, %v; want %d", in, uint64(b), err, largest*u.mult)
		}
		in = fmt.Sprintf("%d%s", largest+1, u.suffix)
		if err := b.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("UnmarshalText(%q) = %d, want an error", in, uint64(b))
		}
	}
}
