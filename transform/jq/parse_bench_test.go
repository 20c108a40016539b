package jq

import (
	"math"
	"testing"

	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/transform/transformtest"
)

// BenchmarkParse compares the parse of a 256-byte order on the fast
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

// BenchmarkEncode compares the encoding of the parsed 256-byte order with
// the reference encoder's.
func BenchmarkEncode(b *testing.B) {
	v, err := parseStd([]byte(transformtest.Order256))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) {
		var e encoder
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.encode(v, math.MaxInt32); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gojq.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gojq.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
