package jq

import (
	"testing"

	"github.com/streamproc/processor/transform/transformtest"
)

// BenchmarkParse compares the parse of a 256-byte order on the tokenizer
// path with encoding/json's.
func BenchmarkParse(b *testing.B) {
	v := []byte(transformtest.Order256)
	b.Run("fast", func(b *testing.B) {
		var p parser
		b.SetBytes(int64(len(v)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.parse(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("std", func(b *testing.B) {
		b.SetBytes(int64(len(v)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseStd(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
