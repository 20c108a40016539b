package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamproc/processor/internal/repartition"
)

// The input's keys (-keys), besides the ordinary text keys k0 ... k999:
//
//	binary  the bytes Java's LongSerializer and IntegerSerializer write
//	        (8 and 4 bytes, big-endian): 1,000 keys, most of them not
//	        UTF-8, many of which differ only in bytes that are not (and
//	        once merged in the store, every such byte read as U+FFFD);
//	        the stateful chain counts by them (binaryKey)
//	orders  a key of its own per input, the order id o<seq>, and a
//	        customer drawn from -customers in the value; the stateful
//	        chain counts by customer (PROCESSOR_AGGREGATE_BY=.customer),
//	        so every customer has inputs in every input partition and
//	        its one count must see them all: through the repartition
//	        topic, <group>-<store>-repartition
const (
	keysText   = "text"
	keysBinary = "binary"
	keysOrders = "orders"
)

// knownKeys are the values of -keys.
var knownKeys = []string{keysText, keysBinary, keysOrders}

// keySpace is how many distinct keys the text and binary inputs cycle
// through: input i has key number i%keySpace.
const keySpace = 1000

// groupField is the member of an orders input's value the chain counts
// by: the aggregate's BY and eoscheck's -group-by.
const groupField = ".customer"

// binaryKey returns key number j of -keys binary, by j%4: LongSerializer
// of j, IntegerSerializer of j, LongSerializer of -j, IntegerSerializer
// of -j. From 128 on a positive key's last byte is 0x80 or above, not
// UTF-8; every negative one is 0xff...; keys of one serializer and sign
// that differ only in such bytes were one store entry before store keys
// were bytes. The 1,000 keys are distinct: a long is 8 bytes, an int 4,
// and the four kinds take different j.
func binaryKey(j int) []byte {
	switch j % 4 {
	case 0:
		return binary.BigEndian.AppendUint64(nil, uint64(int64(j)))
	case 1:
		return binary.BigEndian.AppendUint32(nil, uint32(int32(j)))
	case 2:
		return binary.BigEndian.AppendUint64(nil, uint64(-int64(j)))
	default:
		return binary.BigEndian.AppendUint32(nil, uint32(-int32(j)))
	}
}

// binaryLabel names binaryKey(j) in the input's value: long:N or int:N.
func binaryLabel(j int) string {
	n := j
	if j%4 >= 2 {
		n = -j
	}
	if j%2 == 0 {
		return "long:" + strconv.Itoa(n)
	}
	return "int:" + strconv.Itoa(n)
}

// customer returns the customer of orders input i: c<i % customers>.
func (o options) customer(i int) string { return "c" + strconv.Itoa(i%o.customers) }

// grouped reports whether the chain counts by a member of the value,
// -keys orders: by customer.
func (o options) grouped() bool { return o.keys == keysOrders }

// resolveKeys checks -keys, -customers and -env against the chain.
func (o *options) resolveKeys() {
	if !slices.Contains(knownKeys, o.keys) {
		usage("unknown -keys %q (known: %s)", o.keys, strings.Join(knownKeys, ", "))
	}
	if o.keys != keysText && o.valueFormat != "raw" {
		usage("-keys %s needs -value-format raw (the Avro check compares each output's key with its input's text key)", o.keys)
	}
	if o.grouped() {
		if o.counter() != "aggregate" {
			usage("-keys orders needs aggregate last in -transforms: it counts the orders by %s (the wasm counter counts by record key)", groupField)
		}
		if o.customers < 1 {
			usage("-customers %d must be at least 1", o.customers)
		}
	}
	for _, kv := range o.env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "PROCESSOR_") {
			usage("-env %q: want PROCESSOR_NAME=value", kv)
		}
	}
}

// envList is -env: settings given to every instance, repeatable.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

// Set adds one NAME=value.
func (e *envList) Set(kv string) error { *e = append(*e, kv); return nil }

// inputKey returns the key of ordinary input i and, for its value's
// "key" member, how it is named there.
func (m *inputMaker) inputKey(i int) (key, label string) {
	switch m.d.o.keys {
	case keysBinary:
		return string(binaryKey(i % keySpace)), binaryLabel(i % keySpace)
	case keysOrders:
		key = "o" + strconv.Itoa(i)
		return key, key
	default:
		key = "k" + strconv.Itoa(i%keySpace)
		return key, key
	}
}

// withCustomer gives a JSON object value (an orders input's, ordinary or
// marked) the customer of input i as its first member; other values are
// returned as they are.
func (o options) withCustomer(value []byte, i int) []byte {
	if !o.grouped() || len(value) == 0 || value[0] != '{' {
		return value
	}
	head := `{"customer":` + strconv.Quote(o.customer(i))
	if len(value) > 1 && value[1] != '}' {
		head += ","
	}
	return append([]byte(head), value[1:]...)
}

// printRepartition prints, in the grouped mode, the group's repartition
// topics and the records written to them (their end offsets, markers
// included): none means the processor counted without the hop.
func (d *driver) printRepartition() {
	if !d.o.grouped() {
		return
	}
	adm, closeFn, err := d.admin()
	if err != nil {
		fmt.Printf("%-10s cannot list: %v\n", "repartition", err)
		return
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := repartition.Topics(ctx, adm, d.group)
	if err != nil {
		fmt.Printf("%-10s cannot list: %v\n", "repartition", err)
		return
	}
	if len(topics) == 0 {
		fmt.Printf("%-10s no topic %s-*-repartition: the counts by %s were kept without a repartition hop\n", "repartition", d.group, groupField)
		return
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		fmt.Printf("%-10s %s: cannot list offsets: %v\n", "repartition", strings.Join(topics, ","), err)
		return
	}
	for _, t := range topics {
		var n int64
		parts := 0
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == t && o.Err == nil {
				n += o.Offset
				parts++
			}
		})
		fmt.Printf("%-10s %s: %d partitions, log ends summing to %d\n", "repartition", t, parts, n)
	}
}

// groupArgs are eoscheck's arguments for the grouped mode.
func (d *driver) groupArgs() []string {
	if !d.o.grouped() {
		return nil
	}
	return []string{"-group-by", groupField}
}
