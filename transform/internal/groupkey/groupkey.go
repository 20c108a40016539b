// Package groupkey evaluates the BY setting of the stateful built-ins
// (aggregate, dedupe): a jq expression on the JSON value whose first
// result is a record's group key or id, or, unset, the record's key; and
// keeps the numbers aggregate folds within a bound (number.go).
//
// A group key is bytes in the store, exactly: the record key as it
// arrived, whatever its bytes (Java's LongSerializer keys included), or a
// BY value by its JSON. The two never meet: a record key's store key
// begins with a byte no JSON text begins with (RawPrefix). Builds before
// this format (the 0.5.0 development builds up to it) stored a record key
// as its JSON string, every invalid UTF-8 byte turned into U+FFFD, so
// that keys merged; Key.Legacy is that store key where it named one key
// only, for reading an entry written before the upgrade (Get, Put).
package groupkey

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/jq"
)

// The first byte of a store key made from a record key (BY unset); a
// BY value's store key is its JSON, which begins with none of them.
const (
	// RawPrefix: the record key's bytes follow, the whole key.
	RawPrefix = 0x00
	// RawWindowPrefix: the record key's bytes follow, then the window's
	// start in Unix milliseconds as 8 bytes, big-endian (aggregate's
	// WINDOW).
	RawWindowPrefix = 0x01
)

// By is a compiled BY setting.
type By struct {
	prog   *Expr   // nil: the record key
	values *Picker // parses values for prog (Group)
}

// Compile compiles expr; an empty expr means the record key.
func Compile(expr string) (*By, error) {
	if expr == "" {
		return &By{}, nil
	}
	p, err := CompileExpr(expr)
	if err != nil {
		return nil, err
	}
	return &By{prog: p, values: NewPicker(p)}, nil
}

// Expr is the BY expression; nil for the record key.
func (b *By) Expr() *Expr { return b.prog }

// NeedsValue reports whether Key reads the parsed value.
func (b *By) NeedsValue() bool { return b.prog != nil }

// Key is a record's group key in the forms the stateful built-ins use.
type Key struct {
	// Out is what an output record's key holds: the record key as it
	// arrived, or a BY value's text (a string's) or JSON (another's).
	Out []byte
	// JSON names the key in an output's value: a record key rendered by
	// record.AppendKeyJSON (a string, or {"base64": ...} for a key that
	// is not UTF-8), a BY value's JSON.
	JSON []byte
	// Store is the key of the group's entry: RawPrefix and the record
	// key's bytes, or a BY value's JSON (the string "1" is not the
	// number 1).
	Store []byte
	// legacy is the record key's JSON string, its store key in the
	// earlier format, where that was this key's alone (see Legacy).
	legacy   []byte
	raw      bool
	windowed bool
	start    int64 // the window's start, Unix milliseconds, when windowed
}

// Legacy returns the store key of k's group in the earlier format (a
// record key's JSON string, then 0x00 and the window's start in decimal
// when windowed) where it was this group's alone: the record key is valid
// UTF-8 and holds no U+FFFD, which invalid bytes became. Nil for every
// other key, and for a BY value (whose store key did not change). It is
// made on demand: most records never need it.
func (k Key) Legacy() []byte {
	if k.legacy == nil || !k.windowed {
		return k.legacy
	}
	return strconv.AppendInt(append(append(make([]byte, 0, len(k.legacy)+21), k.legacy...), 0), k.start, 10)
}

// Key returns rec's group key. v is rec's parsed value (jq.ParseValue or
// Picker.Parse) when NeedsValue.
func (b *By) Key(ctx context.Context, rec *kgo.Record, v any) (Key, error) {
	if b.prog == nil {
		return RecordKey(rec.Key)
	}
	r, err := b.prog.First(ctx, v)
	if err != nil {
		return Key{}, fmt.Errorf("BY: %w", err)
	}
	if r == nil {
		return Key{}, errors.New("BY: the expression gave null for the record")
	}
	js, err := keyJSON(r)
	if err != nil {
		return Key{}, fmt.Errorf("BY: encoding the key: %w", err)
	}
	k := Key{Out: js, JSON: js, Store: js}
	if s, ok := r.(string); ok {
		k.Out = []byte(s)
	}
	return k, nil
}

// keyJSON is json.Marshal of a BY result: a string of printable ASCII
// that encoding/json writes as it is (no quote, backslash, or <, > and &,
// which it escapes for HTML) is quoted here directly; the rest goes
// through json.Marshal.
func keyJSON(r any) ([]byte, error) {
	if s, ok := r.(string); ok && plainKey(s) {
		return append(append(append(make([]byte, 0, len(s)+2), '"'), s...), '"'), nil
	}
	return json.Marshal(r)
}

// plainKey reports whether json.Marshal writes s as '"' + s + '"'.
func plainKey(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ' || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			return false
		}
	}
	return true
}

// Group returns the bytes rec's group is kept by, for a repartition hop
// (transform.GroupKeyer): the record key as it arrived, or a BY value's
// JSON, the store key; or the error Key fails the record with.
func (b *By) Group(ctx context.Context, rec *kgo.Record) ([]byte, error) {
	if b.prog == nil {
		if _, err := RecordKey(rec.Key); err != nil {
			return nil, err
		}
		return rec.Key, nil
	}
	v, err := b.values.Parse(rec.Value)
	if err != nil {
		return nil, err
	}
	k, err := b.Key(ctx, rec, v)
	if err != nil {
		return nil, err
	}
	return k.Store, nil
}

// RecordKey returns the group key of a record whose key is key, as it
// arrived; a null key (nil) has none.
func RecordKey(key []byte) (Key, error) {
	if key == nil {
		return Key{}, errors.New("the record has no key to group by; set BY to a jq expression on the value")
	}
	buf := append(append(make([]byte, 0, 2*len(key)+9), RawPrefix), key...) // the store key, then the JSON, one allocation mostly
	k := Key{Out: key, Store: buf[:len(buf):len(buf)], raw: true}
	k.JSON = record.AppendKeyJSON(buf[len(buf):], key)
	if utf8.Valid(key) && !bytes.ContainsRune(key, utf8.RuneError) {
		k.legacy = k.JSON // a valid key's rendering is its JSON string, as before
	}
	return k, nil
}

// Window returns k's key in the window that starts at start: the store
// keys gain the window's start, the others stay.
func (k Key) Window(start time.Time) Key {
	ms := start.UnixMilli()
	if !k.raw {
		k.Store = strconv.AppendInt(append(append(make([]byte, 0, len(k.Store)+21), k.Store...), 0), ms, 10)
		return k
	}
	key := k.Out
	s := append(append(make([]byte, 0, 9+len(key)), RawWindowPrefix), key...)
	k.Store = binary.BigEndian.AppendUint64(s, uint64(ms))
	k.windowed, k.start = true, ms
	return k
}

// Get reads k's entry: under k.Store, or, when it has none there, under
// k.Legacy(), an entry written in the earlier format; legacy reports the
// latter, and Put then moves the entry.
func Get(st transform.Store, k Key) (value []byte, ok, legacy bool, err error) {
	value, ok, err = st.Get(k.Store)
	if ok || err != nil || k.legacy == nil {
		return value, ok, false, err
	}
	value, ok, err = st.Get(k.Legacy())
	return value, ok, ok, err
}

// Put writes k's entry under k.Store, and, when Get found it under
// k.Legacy(), deletes that one: the entry moves to its new key in the
// transaction that writes it.
func Put(st transform.Store, k Key, value []byte, expires time.Time, legacy bool) error {
	if err := st.Put(k.Store, value, expires); err != nil {
		return err
	}
	if legacy {
		return st.Delete(k.Legacy())
	}
	return nil
}

// First returns the first result of prog on v; no result is an error.
func First(ctx context.Context, prog *jq.Program, v any) (any, error) {
	iter := prog.Run(ctx, v)
	r, ok := iter.Next()
	if !ok {
		return nil, errors.New("the expression gave no result for the record")
	}
	if err, isErr := r.(error); isErr {
		return nil, jq.RunError(err)
	}
	return r, nil
}

// ParseWindow returns the group key and window start (Unix
// milliseconds) of a windowed store key (Key.Window's Store), for a stage
// that emits a window from its entry alone (aggregate's EMIT=close). Only
// Out and JSON are set. A legacy store key (a record key's JSON string,
// 0x00, the start in decimal) reads as the BY value of that string, which
// gives the same Out and JSON.
func ParseWindow(store []byte) (k Key, start int64, err error) {
	if len(store) >= 9 && store[0] == RawWindowPrefix {
		key := store[1 : len(store)-8]
		k = Key{Out: key, JSON: record.AppendKeyJSON(nil, key), raw: true, windowed: true}
		k.start = int64(binary.BigEndian.Uint64(store[len(store)-8:]))
		k.Store = store
		return k, k.start, nil
	}
	i := bytes.LastIndexByte(store, 0)
	if i < 0 {
		return Key{}, 0, fmt.Errorf("the store key %q names no window", store)
	}
	start, err = strconv.ParseInt(string(store[i+1:]), 10, 64)
	if err != nil {
		return Key{}, 0, fmt.Errorf("the store key %q names no window: %w", store, err)
	}
	js := store[:i]
	k = Key{Out: js, JSON: js, Store: store}
	var s string
	if len(js) > 0 && js[0] == '"' && json.Unmarshal(js, &s) == nil {
		k.Out = []byte(s)
	}
	return k, start, nil
}
