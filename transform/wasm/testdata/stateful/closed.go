//go:build wasip1

package main

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"github.com/streamproc/processor/transform/wasm/guest"
)

func init() { guest.HandleClosed(closed) }

var closedOut []guest.Record

// closed is the module's ClosedFunc. What it does with a closed entry
// depends on the entry's value; see the cases below.
func closed(c guest.Closing) ([]guest.Record, int64, error) {
	cmd, arg, _ := strings.Cut(string(c.Value), ":")
	switch cmd {
	case "emit": // emit:<n>:<lineage>: n records (1 unsaid), the first stamped with the expiry, the others 1000+i; lineage -1 unsaid
		ns, lin, _ := strings.Cut(arg, ":")
		n, err := strconv.Atoi(ns)
		if err != nil {
			n = 1
		}
		lineage, err := strconv.ParseInt(lin, 10, 64)
		if err != nil {
			lineage = -1
		}
		closedOut = closedOut[:0]
		for i := range n {
			r := guest.Record{Key: c.Key, Value: []byte(strconv.Itoa(i)), Headers: []guest.Header{{Key: "store", Value: []byte(c.Store)}}}
			if i > 0 {
				r.Timestamp = int64(1000 + i)
			}
			closedOut = append(closedOut, r)
		}
		return closedOut, lineage, nil
	case "describe": // what the closing says of itself
		v := c.Store + " " + c.Source.Topic + "/" + strconv.Itoa(int(c.Source.Partition)) + "/" + strconv.FormatInt(c.Source.Offset, 10) +
			" expiry=" + strconv.FormatInt(c.Expiry, 10) + " stream=" + strconv.FormatInt(c.StreamTime, 10)
		if ms, ok := guest.StreamTime(); ok {
			v += " host=" + strconv.FormatInt(ms, 10)
		}
		return []guest.Record{{Key: c.Key, Value: []byte(v), Topic: "elsewhere"}}, -1, nil
	case "fail":
		return nil, -1, errors.New("failing a closed entry")
	case "trap":
		p := (*byte)(unsafe.Pointer(uintptr(0xFFFFFFF0)))
		return []guest.Record{{Value: []byte{*p}}}, -1, nil
	case "loop":
		for {
		}
	case "store": // stores are not reachable while closing
		_, _, err := s0.Get(c.Key)
		return nil, -1, err
	case "negative-time":
		return []guest.Record{{Value: []byte("x"), Timestamp: -5}}, -1, nil
	case "own-topic":
		return []guest.Record{{Value: []byte("x"), Topic: c.Source.Topic}}, -1, nil
	}
	return nil, -1, errors.New("unknown closed command " + cmd)
}
