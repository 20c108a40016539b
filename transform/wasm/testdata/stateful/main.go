//go:build wasip1

// Command stateful is a test guest of the state store host functions.
// It declares the imports itself as well, to call them with addresses and
// lengths the SDK never passes. What it does with a record depends on the
// record's value; see the cases below. Its stores are s0 and s1.
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/streamproc/processor/transform/wasm/guest"
)

//go:wasmimport processor store_index
func rawIndex(name, nameLen uint32) int32

//go:wasmimport processor store_get
func rawGet(store int32, key, keyLen, buf, bufCap uint32) int32

//go:wasmimport processor store_put
func rawPut(store int32, key, keyLen, value, valueLen uint32, expiresAt int64) int32

//go:wasmimport processor store_delete
func rawDelete(store int32, key, keyLen uint32) int32

func init() { guest.Handle(handle) }

var (
	s0, s1 = guest.Store("s0"), guest.Store("s1")
	buf    = make([]byte, 64)
	out    = make([]guest.Record, 1)
)

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// reply returns one record with key in.Key and value v.
func reply(in guest.Record, v string) ([]guest.Record, error) {
	out[0] = guest.Record{Key: in.Key, Value: []byte(v)}
	return out, nil
}

func handle(in guest.Record) ([]guest.Record, error) {
	key := in.Key
	cmd, arg, _ := strings.Cut(string(in.Value), ":")
	switch cmd {
	case "time": // the record's stream time
		ms, ok := guest.StreamTime()
		if !ok {
			return reply(in, "none")
		}
		return reply(in, strconv.FormatInt(ms, 10))
	case "count": // count in s0 by key, as the count example does
		v, ok, err := s0.Get(key)
		if err != nil {
			return nil, err
		}
		n := 0
		if ok {
			n, _ = strconv.Atoi(string(v))
		}
		n++
		if err := s0.Put(key, []byte(strconv.Itoa(n)), 0); err != nil {
			return nil, err
		}
		return reply(in, strconv.Itoa(n))
	case "put": // put:<value>[:<expires ms>] into s0
		v, exp, _ := strings.Cut(arg, ":")
		ms, _ := strconv.ParseInt(exp, 10, 64)
		if err := s0.Put(key, []byte(v), ms); err != nil {
			return nil, err
		}
		return reply(in, "ok")
	case "get": // the value of key in s0
		v, ok, err := s0.Get(key)
		if err != nil {
			return nil, err
		}
		if !ok {
			return reply(in, "none")
		}
		return reply(in, "="+string(v))
	case "rw": // read your writes, across both stores
		var b strings.Builder
		get := func(s *guest.StateStore) {
			v, ok, err := s.Get(key)
			fmt.Fprintf(&b, "%s:%q:%v:%v;", s.Name(), v, ok, err)
		}
		get(s0)
		s0.Put(key, []byte("one"), 0)
		get(s0)
		get(s1)
		s1.Put(key, []byte("other"), 0)
		s0.Delete(key)
		get(s0)
		get(s1)
		s0.Put(key, []byte("two"), 0)
		get(s0)
		return reply(in, b.String())
	case "many": // many:<n>: n writes of distinct keys and a read of each
		n, _ := strconv.Atoi(arg)
		for i := range n {
			s0.Put([]byte("m"+strconv.Itoa(i)), []byte(strconv.Itoa(i)), 0)
		}
		s0.Delete([]byte("m0"))
		for i := range n {
			v, ok, _ := s0.Get([]byte("m" + strconv.Itoa(i)))
			if (i == 0) == ok || ok && string(v) != strconv.Itoa(i) {
				return nil, fmt.Errorf("m%d: %q %v", i, v, ok)
			}
		}
		return reply(in, "ok")
	case "big": // big:<n>: put n bytes, read them back through Get's second call
		n, _ := strconv.Atoi(arg)
		if err := s0.Put(key, []byte(strings.Repeat("b", n)), 0); err != nil {
			return nil, err
		}
		v, ok, err := s0.Get(key)
		if err != nil || !ok || len(v) != n {
			return nil, fmt.Errorf("read back %d bytes, %v, %v", len(v), ok, err)
		}
		small, ok, err := s0.AppendGet(make([]byte, 0, 1), key)
		if err != nil || !ok || len(small) != n {
			return nil, fmt.Errorf("AppendGet %d bytes, %v, %v", len(small), ok, err)
		}
		return reply(in, strconv.Itoa(len(v)))
	case "put-then-fail":
		s0.Put(key, []byte("written"), 0)
		return nil, errors.New("failing after a write")
	case "put-then-trap":
		s0.Put(key, []byte("written"), 0)
		p := (*byte)(unsafe.Pointer(uintptr(0xFFFFFFF0)))
		return reply(in, string([]byte{*p}))
	case "put-loop": // writes of 1 MiB until the host says no, 64 at most
		v := make([]byte, 1<<20)
		for i := range 64 {
			if err := s0.Put([]byte(strconv.Itoa(i)), v, 0); err != nil {
				return nil, fmt.Errorf("put %d: %w", i, err)
			}
		}
		return nil, errors.New("64 writes of 1 MiB and the host never said no")
	case "unknown-store":
		_, _, err := guest.Store("nope").Get(key)
		return nil, err
	case "bad-index": // a store index past STORES, its -2 ignored
		rawGet(7, addr(key), uint32(len(key)), addr(buf), uint32(len(buf)))
		return reply(in, "ignored the error")
	case "negative-index":
		rawPut(-1, addr(key), uint32(len(key)), 0, 0, 0)
		return reply(in, "ignored the error")
	case "index":
		return reply(in, fmt.Sprint(rawIndex(addr(key), uint32(len(key)))))
	case "index-bad-name":
		rawIndex(0xFFFFFFF0, 64)
	case "get-bad-key":
		rawGet(0, 0xFFFFFF00, 1000, addr(buf), uint32(len(buf)))
	case "get-huge-key":
		rawGet(0, addr(key), 0x7FFFFFFF, addr(buf), uint32(len(buf)))
	case "get-bad-buf":
		rawGet(0, addr(key), uint32(len(key)), 0xFFFFFFF0, 100)
	case "get-huge-buf":
		rawGet(0, addr(key), uint32(len(key)), addr(buf), 0xFFFFFFFF)
	case "put-bad-value":
		rawPut(0, addr(key), uint32(len(key)), 0xFFFFFFF0, 64, 0)
	case "put-huge-value":
		rawPut(0, addr(key), uint32(len(key)), addr(buf), 0x80000000, 0)
	case "delete-bad-key":
		rawDelete(0, 0xFFFFFFFF, 2)
	case "gets": // gets:<n>: n host calls of store_get on one key, for the benchmark
		n, _ := strconv.Atoi(arg)
		for range n {
			rawGet(0, addr(key), uint32(len(key)), addr(buf), uint32(len(buf)))
		}
		return reply(in, "ok")
	case "puts": // puts:<n>: n host calls of store_put of one key
		n, _ := strconv.Atoi(arg)
		for range n {
			rawPut(0, addr(key), uint32(len(key)), addr(buf), 8, 0)
		}
		return reply(in, "ok")
	}
	return reply(in, "unknown command "+cmd)
}

func main() {}
