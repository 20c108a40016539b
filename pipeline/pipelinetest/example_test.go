package pipelinetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/pipeline/pipelinetest"
	"github.com/streamproc/processor/transform"
)

// upper is a plugin's transform: it upper-cases a value, drops an empty
// one, and refuses one that says "bad".
func upper(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	switch {
	case len(r.Value) == 0:
		return out, nil
	case string(r.Value) == "bad":
		return nil, errors.New("a bad value")
	}
	r.Value = bytes.ToUpper(r.Value)
	return append(out, r), nil
}

// A plugin's transform tested through the real loop: the dead-letter
// policy applies as in the processor, each input in its own transaction.
func Example() {
	reg := &transform.Registry{}
	reg.Register("upper", transform.Plain("upper-cases values", func() (transform.Transform, error) {
		return transform.Func(upper), nil
	}))
	chain, err := reg.Build([]transform.Entry{{Name: "upper"}}, nil)
	if err != nil {
		panic(err)
	}
	defer chain.Close()
	d, err := pipelinetest.New(chain, pipelinetest.WithOptions(pipeline.Options{
		OutputTopic: "out", OnError: pipeline.DeadLetter, DLQTopic: "dlq", Lineage: true}))
	if err != nil {
		panic(err)
	}
	defer d.Close()
	res, err := d.Send(
		&kgo.Record{Key: []byte("a"), Value: []byte("hello")},
		&kgo.Record{Key: []byte("b"), Value: nil},
		&kgo.Record{Key: []byte("c"), Value: []byte("bad")},
	)
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		switch {
		case r.DeadLetter != nil:
			fmt.Printf("%s: dead letter to %s (%v)\n", r.Input.Key, r.DeadLetterRecord.Topic, r.DeadLetter.Err)
		case r.Filtered():
			fmt.Printf("%s: filtered\n", r.Input.Key)
		default:
			fmt.Printf("%s: %s to %s\n", r.Input.Key, r.Outputs[0].Value, r.Outputs[0].Topic)
		}
	}
	fmt.Println(len(d.Read("out")), "record in out")
	// Output:
	// a: HELLO to out
	// b: filtered
	// c: dead letter to dlq (transform upper: a bad value)
	// 1 record in out
}
