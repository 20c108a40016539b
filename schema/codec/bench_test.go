package codec_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/schema"
)

// BenchmarkStrategyChain is one Avro record through the decode and encode
// stages around a stage that passes it on, per subject name strategy:
// what naming each output's subject by its input's record type costs over
// the topic name strategy's one subject.
func BenchmarkStrategyChain(b *testing.B) {
	for _, strategy := range []schema.SubjectStrategy{schema.TopicStrategy, schema.RecordStrategy, schema.TopicRecordStrategy} {
		b.Run(string(strategy), func(b *testing.B) {
			fx := newStrategyFixture(b, formatsTwoTypes[0], strategy)
			if strategy == schema.TopicStrategy {
				// One subject, out-value, whose latest is the second type:
				// every input is of it.
				fx.wire[0] = fx.wire[1]
			}
			c := fx.chain(b, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
				return append(out, r), nil
			})
			ctx := context.Background()
			out := make([]*kgo.Record, 0, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				var err error
				if out, err = c.Process(ctx, record.Source{}, &kgo.Record{Value: fx.wire[i%2]}, out[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
