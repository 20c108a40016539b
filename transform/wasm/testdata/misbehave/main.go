// Command misbehave is a test guest built with the SDK. What it does with
// a record depends on the record's value; see the cases below.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/streamproc/processor/transform/wasm/guest"
)

func init() { guest.Handle(handle) }

var hoard [][]byte

func handle(in guest.Record) ([]guest.Record, error) {
	switch v := string(in.Value); {
	case v == "panic":
		panic("boom")
	case v == "error":
		return nil, errors.New("bad order")
	case v == "long-error":
		return nil, errors.New(strings.Repeat("x", 5000))
	case v == "trap":
		// An out-of-bounds load: a WebAssembly trap, not a Go panic.
		p := (*byte)(unsafe.Pointer(uintptr(0xFFFFFFF0)))
		return []guest.Record{{Value: []byte{*p}}}, nil
	case v == "exit":
		os.Exit(3)
	case v == "loop":
		for {
		}
	case v == "grow":
		for {
			hoard = append(hoard, make([]byte, 16<<20))
		}
	case v == "filter":
		return nil, nil
	case v == "multi":
		// Three outputs: the input upper-cased to the default topic, a
		// record with a null key and new headers to topic "side", and an
		// empty (non-null) value with a null header value.
		return []guest.Record{
			{Key: in.Key, Value: []byte("MULTI"), Headers: in.Headers},
			{Value: []byte("side"), Topic: "side", Headers: []guest.Header{{Key: "h1", Value: []byte("v1")}, {Key: "trace", Value: in.Value}}},
			{Key: []byte("k3"), Value: []byte{}, Headers: []guest.Header{{Key: "nullh", Value: nil}}},
		}, nil
	case v == "describe":
		// The input as the guest sees it.
		var b strings.Builder
		fmt.Fprintf(&b, "src=%s/%d/%d ts=%d key=%s keynil=%v hdrs=", in.Source.Topic, in.Source.Partition, in.Source.Offset, in.Timestamp, in.Key, in.Key == nil)
		for _, h := range in.Headers {
			fmt.Fprintf(&b, "%s:%s:%v;", h.Key, h.Value, h.Value == nil)
		}
		return []guest.Record{{Key: in.Key, Value: []byte(b.String()), Headers: in.Headers}}, nil
	case v == "bad-topic":
		return []guest.Record{{Value: in.Value, Topic: "not a topic"}}, nil
	case v == "loopback":
		return []guest.Record{{Value: in.Value, Topic: in.Source.Topic}}, nil
	case v == "clock":
		return []guest.Record{{Value: []byte(fmt.Sprint(time.Now().UnixMilli()))}}, nil
	case v == "fs":
		_, err := os.ReadFile("/etc/hostname")
		return []guest.Record{{Value: []byte(fmt.Sprintf("err=%v env=%d args=%d", err, len(os.Environ()), len(os.Args)))}}, nil
	case strings.HasPrefix(v, "big:"):
		var n int
		fmt.Sscan(v[4:], &n)
		return []guest.Record{{Key: in.Key, Value: []byte(strings.Repeat("b", n))}}, nil
	case strings.HasPrefix(v, "amplify:"):
		// amplify:<records>:<bytes>: that many records whose values are
		// all the same region of that many bytes, which the guest holds
		// once but the host would copy once per record.
		var n, size int
		fmt.Sscanf(v[len("amplify:"):], "%d:%d", &n, &size)
		region := make([]byte, size)
		outs := make([]guest.Record, n)
		for i := range outs {
			outs[i] = guest.Record{Key: in.Key, Value: region}
		}
		return outs, nil
	case v == "stderr-panic":
		fmt.Fprintln(os.Stderr, "about to fail")
		var m map[string]int
		m["x"] = 1 // a nil map write: a Go panic, recovered by the SDK
	}
	return []guest.Record{in}, nil
}

func main() {}
