package jq

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/sample"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform/identity"
	"github.com/streamproc/processor/transform/transformtest"
)

// BenchmarkIdentity is the baseline: the cost of a transform call.
func BenchmarkIdentity(b *testing.B) { transformtest.Bench(b, identity.Transform{}, 1) }

// BenchmarkJQ is the per-record cost of jq programs on a 256-byte JSON
// value: parse, run, encode.
func BenchmarkJQ(b *testing.B) {
	for _, c := range []struct{ name, expr string }{
		{"identity", "."},
		{"map", ".amount_cents *= 2"},
		{"project", "{order_id, amount_cents}"},
		{"filter-out", `select(.status == "cancelled")`},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(&Settings{Expr: c.expr})
			if err != nil {
				b.Fatal(err)
			}
			transformtest.Bench(b, tr, -1)
		})
	}
}

// chainExpr is the program of the jq chain rows of make bench.
const chainExpr = sample.JQChain

// BenchmarkJQChain is the per-record cost of the jq chain rows' program on
// their records (sample orders of 100 bytes and 1 KiB).
func BenchmarkJQChain(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
	}{{"100B", 100}, {"1KiB", 1024}} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(&Settings{Expr: chainExpr})
			if err != nil {
				b.Fatal(err)
			}
			in := sample.Order(12345, 100, c.size)
			rec := &kgo.Record{}
			out := make([]*kgo.Record, 0, 4)
			src := record.Source{Topic: "orders"}
			b.SetBytes(int64(len(in.Value)))
			b.ReportAllocs()
			for b.Loop() {
				*rec = kgo.Record{Key: in.Key, Value: in.Value}
				if res, err := tr.Process(context.Background(), src, rec, out[:0]); err != nil || len(res) != 1 {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkJQIdentityEscaped is "." on a value that canon leaves to the
// parse and the encoder: the 256-byte order with an escape in its last
// string, so that canon reads nearly all of it before it declines.
func BenchmarkJQIdentityEscaped(b *testing.B) {
	v := []byte(strings.Replace(transformtest.Order256, `door......`, `door\n....`, 1))
	tr, err := New(&Settings{Expr: "."})
	if err != nil {
		b.Fatal(err)
	}
	rec := &kgo.Record{}
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		*rec = kgo.Record{Key: []byte("cust-98765"), Value: v}
		if res, err := tr.Process(context.Background(), record.Source{Topic: "orders"}, rec, nil); err != nil || len(res) != 1 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkJQGojqOnly is BenchmarkJQ's programs and the chain rows'
// program with PROCESSOR_JQ_FAST=false: gojq alone on encoding/json's
// parse, written by gojq.Marshal; the cost of the escape hatch, beside
// the rows of BenchmarkJQ and BenchmarkJQChain.
func BenchmarkJQGojqOnly(b *testing.B) {
	for _, c := range []struct{ name, expr string }{
		{"identity", "."},
		{"map", ".amount_cents *= 2"},
		{"project", "{order_id, amount_cents}"},
		{"filter-out", `select(.status == "cancelled")`},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(&Settings{Expr: c.expr, Fast: Fast{Off: true}})
			if err != nil {
				b.Fatal(err)
			}
			transformtest.Bench(b, tr, -1)
		})
	}
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("chain-%dB", size), func(b *testing.B) {
			tr, err := New(&Settings{Expr: chainExpr, Fast: Fast{Off: true}})
			if err != nil {
				b.Fatal(err)
			}
			in := sample.Order(12345, 100, size)
			rec := &kgo.Record{}
			out := make([]*kgo.Record, 0, 4)
			b.SetBytes(int64(len(in.Value)))
			b.ReportAllocs()
			for b.Loop() {
				*rec = kgo.Record{Key: in.Key, Value: in.Value}
				if res, err := tr.Process(context.Background(), record.Source{Topic: "orders"}, rec, out[:0]); err != nil || len(res) != 1 {
					b.Fatal(res, err)
				}
			}
		})
	}
}
