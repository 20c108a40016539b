package transform

import (
	"fmt"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/bytesize"
	"github.com/streamproc/processor/settings"
)

// DefaultMaxOutputBytes is the limit on the output bytes of one input
// record (see MaxOutputBytes) of a chain built without the option, and the
// processor's default limit: 16MiB, sixteen records
// of the largest size a topic takes by default (Kafka's message.max.bytes
// is about 1MiB), or a 1MiB order flat-mapped into its items with room to
// spare, and a quarter of the default bound on a transaction's output
// bytes, so one record
// cannot fill a transaction on its own.
const DefaultMaxOutputBytes = 16 << 20

// The memory an output record takes besides its bytes: the record itself
// and each of its headers. Size counts them so that a limit in bytes also
// bounds a flood of empty records (or empty headers), which hold no bytes
// of their own but still take memory.
const (
	RecordOverhead = int64(unsafe.Sizeof(kgo.Record{}))
	HeaderOverhead = int64(unsafe.Sizeof(kgo.RecordHeader{}))
)

// Bytes is what a record's key, value, header keys and header values
// hold: what the processor counts of its outputs against its bound on a
// transaction's output bytes.
func Bytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// Size is what the chain counts of an output record against its limit on
// one input record's outputs: its Bytes, plus RecordOverhead and
// HeaderOverhead for each header.
func Size(r *kgo.Record) int64 {
	return RecordOverhead + HeaderOverhead*int64(len(r.Headers)) + Bytes(r)
}

// BuildOption changes how Build builds a chain.
type BuildOption func(*buildOptions)

type buildOptions struct {
	maxOutputBytes int64
	names          Names
}

// Names are how the host names settings in the messages of errors that a
// running chain returns: the name of the chain's limit on one input
// record's outputs (MaxOutputBytes), and of each setting of a chain entry,
// e.g. their variables. Without them, a message says "the limit" and shows
// a setting by its declared name (TIMEOUT).
type Names struct {
	Limit   string                                         // e.g. the variable MaxOutputBytes came from
	Setting func(p settings.Plugin, setting string) string // nil: the declared name
}

// WithNames makes the chain's errors name settings as names says: it sets
// OutputLimitError.Setting, and the Name of a *settings.Message that a
// stage returns.
func WithNames(names Names) BuildOption {
	return func(o *buildOptions) { o.names = names }
}

// MaxOutputBytes limits what one input record may produce, at every stage
// of the chain: the Size of the outputs of one stage for one input record,
// added up over all the stage's calls for it, may not pass n. A record
// whose outputs do fails with an *Error naming the stage, wrapping an
// *OutputLimitError: a permanent error, so the processor's error policy
// decides what happens to it. Stages that implement OutputLimiter are told n, so they
// stop before they spend the memory. n <= 0 means DefaultMaxOutputBytes.
func MaxOutputBytes(n int64) BuildOption {
	return func(o *buildOptions) { o.maxOutputBytes = n }
}

// OutputLimiter is an optional interface of a transform that can stop
// producing a record's outputs once their bytes pass a limit, before it
// has spent the memory, rather than leave it to the chain to find out once
// a call returns. Build calls LimitOutputBytes once, after New, with the
// chain's MaxOutputBytes. A transform that passes it fails the record with
// an *OutputLimitError.
type OutputLimiter interface {
	// LimitOutputBytes sets the most that the outputs of one call may hold,
	// counted as Size counts them.
	LimitOutputBytes(n int64)
}

// OutputLimitError is the error of a record whose outputs passed the limit
// on one input record's output bytes (MaxOutputBytes). A transform returns
// it as it is, not wrapped, and the chain wraps it in an *Error naming the
// stage, after setting Setting from its Names. It is permanent: retrying
// the record would produce the same outputs.
type OutputLimitError struct {
	Limit   int64  // the limit in bytes
	Bytes   int64  // what the outputs held when the limit was passed, at least
	Records int    // how many outputs there were by then (with the one that passed it)
	Setting string // the limit's name (Names.Limit); empty: "the limit"
}

func (e *OutputLimitError) Error() string {
	if e.Setting == "" {
		return fmt.Sprintf("the outputs of one input record passed the limit of %s (%d records, at least %d bytes)",
			bytesize.Size(e.Limit), e.Records, e.Bytes)
	}
	return fmt.Sprintf("the outputs of one input record passed %s=%s (%d records, at least %d bytes)",
		e.Setting, bytesize.Size(e.Limit), e.Records, e.Bytes)
}
