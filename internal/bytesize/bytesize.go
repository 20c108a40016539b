// Package bytesize parses and prints sizes in bytes such as 64MiB, the form
// of every size setting (PROCESSOR_MAX_TXN_BYTES, PROCESSOR_WASM_MAX_MEMORY).
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a size in bytes, written as a number with an optional unit
// B, KiB, MiB or GiB (powers of 1024), e.g. 64MiB. Settings of that form
// (PROCESSOR_MAX_TXN_BYTES, PROCESSOR_WASM_MAX_MEMORY) use it.
type Size uint64

var units = []struct {
	suffix string
	mult   uint64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// UnmarshalText parses a size such as 64MiB; the configuration and the
// transforms' settings read sizes with it.
func (b *Size) UnmarshalText(text []byte) error {
	s := string(text)
	num, mult := strings.TrimSpace(s), uint64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return fmt.Errorf("%q is not a size such as 64MiB", s)
	}
	*b = Size(n * mult)
	return nil
}

// String formats b in the largest unit that divides it.
func (b Size) String() string {
	for _, u := range units {
		if b != 0 && uint64(b)%u.mult == 0 {
			return strconv.FormatUint(uint64(b)/u.mult, 10) + u.suffix
		}
	}
	return "0B"
}
