package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/schema"
)

// printSchemas prints, with -value-format avro, the registry and the
// subject versions the run used.
func (d *driver) printSchemas() {
	if d.o.valueFormat != "avro" {
		return
	}
	d.mu.Lock()
	in := slices.Clone(d.inSubjects)
	d.mu.Unlock()
	half := d.o.records / 2
	spans := []string{fmt.Sprintf("inputs 0..%d", half-1), fmt.Sprintf("inputs %d..%d", half, d.o.records-1)}
	var vs []string
	for i, s := range in[:min(len(in), 2)] {
		vs = append(vs, fmt.Sprintf("v%d (id %d) for %s", s.Version, s.ID, spans[i]))
	}
	fmt.Printf("values     avro, registry %s: input %s-value %s; output %s v%d (id %d)\n",
		d.registryURL, d.in, strings.Join(vs, ", "), d.outSubject.Subject, d.outSubject.Version, d.outSubject.ID)
}

// avroAudit is what auditAvro found in the output topic.
type avroAudit struct {
	read, decoded int
	wrongID       int    // in the wire format, but not with the id wanted
	undecodable   int    // not in the wire format, or not decoding
	wrongContent  int    // decoded, but not what the input and chain make
	example       string // the first wrong one
}

// outputValue is the JSON of a decoded output value.
type outputValue struct {
	Key  string `json:"key"`
	Seq  *int   `json:"seq"`
	Pad  string `json:"pad"`
	Half int    `json:"half"`
	Seen bool   `json:"seen"`
}

// auditAvro reads every output a read_committed reader sees and checks,
// with -value-format avro, that each value is in the wire format with
// the schema the chain's outputs get (the output subject's with jq; with
// a chain that never reads values, the input's bytes as they were) and
// decodes to what its input makes: its key, half 1 before the half of
// the input and 2 from there on, seen true with jq, a pad exactly for
// nearlimit inputs. eoscheck judges the outputs by keys and lineage
// headers only; this is the values' part. It prints one line and reports
// whether every value passed.
func (d *driver) auditAvro() bool {
	a, err := d.readAvroOutputs()
	if err != nil {
		fmt.Println("avro outputs: could not be read:", err)
		return false
	}
	bad := a.wrongID + a.undecodable + a.wrongContent
	fmt.Printf("avro outputs: %d read, %d decoded, %d with another schema id, %d not decodable, %d not what the input makes\n",
		a.read, a.decoded, a.wrongID, a.undecodable, a.wrongContent)
	if bad > 0 {
		fmt.Println("avro outputs: the first wrong one:", a.example)
		return false
	}
	return true
}

// readAvroOutputs reads the output topic read_committed up to its end and
// checks each value.
func (d *driver) readAvroOutputs() (avroAudit, error) {
	var a avroAudit
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm, closeAdm, err := d.admin()
	if err != nil {
		return a, err
	}
	ends, err := adm.ListEndOffsets(ctx, d.out)
	closeAdm()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return a, err
	}
	parts := map[int32]kgo.Offset{}
	left := map[int32]int64{} // the last offset of each partition still to come
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			parts[o.Partition] = kgo.NewOffset().AtStart()
			left[o.Partition] = o.Offset - 1
		}
	})
	if len(parts) == 0 {
		return a, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{d.out: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		return a, err
	}
	defer cl.Close()
	dec := schema.NewDecoder(d.reg, schema.Avro, schema.DecoderOptions{})
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return a, fmt.Errorf("the read did not reach the end of %d partitions: %w", len(left), ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			return a, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if last, ok := left[r.Partition]; ok && r.Offset >= last {
				delete(left, r.Partition)
			}
			if !r.Attrs.IsControl() {
				d.checkAvroOutput(ctx, dec, r, &a)
			}
		})
	}
	return a, nil
}

// checkAvroOutput checks one output value into a.
func (d *driver) checkAvroOutput(ctx context.Context, dec *schema.Decoder, r *kgo.Record, a *avroAudit) {
	a.read++
	at := fmt.Sprintf("%s/%d@%d (key %s)", r.Topic, r.Partition, r.Offset, r.Key)
	note := func(n *int, format string, args ...any) {
		*n++
		if a.example == "" {
			a.example = at + ": " + fmt.Sprintf(format, args...)
		}
	}
	js, err := dec.Decode(ctx, r.Value, nil)
	if err != nil {
		note(&a.undecodable, "%v", err)
		return
	}
	a.decoded++
	id := int(binary.BigEndian.Uint32(r.Value[1:5]))
	if want := d.wantOutputIDs(); !slices.Contains(want, id) {
		note(&a.wrongID, "schema id %d, want %v", id, want)
		return
	}
	var v outputValue
	if err := json.Unmarshal(js, &v); err != nil || v.Seq == nil {
		note(&a.wrongContent, "decoded to %.200s, not an object with a seq", js)
		return
	}
	if why := d.wrongOutput(string(r.Key), v); why != "" {
		note(&a.wrongContent, "%s in %.200s", why, js)
	}
}

// wantOutputIDs are the schema ids an output value may carry: the output
// subject's when the chain decodes and encodes values (jq), else the
// input's versions.
func (d *driver) wantOutputIDs() []int {
	if slices.Contains(d.o.transforms, "jq") {
		return []int{d.outSubject.ID}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []int
	for _, s := range d.inSubjects {
		ids = append(ids, s.ID)
	}
	return ids
}

// wrongOutput says what is wrong with the decoded output v of the input
// with key key, "" when nothing.
func (d *driver) wrongOutput(key string, v outputValue) string {
	seq, jq := *v.Seq, slices.Contains(d.o.transforms, "jq")
	half := 1
	if seq >= d.o.records/2 {
		half = 2
	}
	// Without jq the values are the input's: the first version has no
	// half, which decodes as absent (0).
	if !jq && half == 1 {
		half = 0
	}
	near := check.MarkOf([]byte(key), nil).Class == check.NearLimit
	switch {
	case v.Key != key:
		return fmt.Sprintf("key %q, the record's %q", v.Key, key)
	case v.Half != half:
		return fmt.Sprintf("half %d, want %d for seq %d", v.Half, half, seq)
	case v.Seen != jq:
		return fmt.Sprintf("seen %t, want %t", v.Seen, jq)
	case near != (v.Pad != ""):
		return fmt.Sprintf("a pad of %d bytes", len(v.Pad))
	}
	return ""
}
