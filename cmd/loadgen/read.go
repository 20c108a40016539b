package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/schema"
)

// read prints the values of the first c.read committed records of
// c.topic (from the start of each partition) to out, one a line: as they
// are with -format json, decoded to JSON by their schema ids with -format
// avro. It fails when fewer arrive within c.wait.
func read(ctx context.Context, c config, out io.Writer) error {
	var dec *schema.Decoder
	if c.format == "avro" {
		reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{c.registry}})
		if err != nil {
			return err
		}
		dec = schema.NewDecoder(reg, schema.Avro, schema.DecoderOptions{})
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(c.brokers, ",")...),
		kgo.ConsumeTopics(c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	printed := 0
	for printed < c.read {
		fs := cl.PollRecords(ctx, c.read-printed)
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d records read within %s", printed, c.read, c.wait)
		}
		for _, r := range fs.Records() {
			v := r.Value
			if dec != nil {
				if v, err = dec.Decode(ctx, r.Value, nil); err != nil {
					return fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
				}
			}
			fmt.Fprintf(out, "%s\n", v)
			printed++
		}
	}
	return nil
}
