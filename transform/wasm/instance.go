package wasm

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// instance is one instantiated module with its per-call state. One caller
// uses it at a time (the pool hands it out), so nothing here is locked.
type instance struct {
	t         *Transform
	mod       api.Module
	mem       api.Memory
	versionFn api.Function
	allocFn   api.Function
	processFn api.Function
	closedFn  api.Function // processor_closed, nil when not exported
	stack     [2]uint64

	// The input buffer the guest handed out through processor_alloc.
	inPtr, inCap uint32

	// The deadline: ctx is cancelled by timer, which each Process call
	// arms and disarms; wazero then stops the guest
	// (WithCloseOnContextDone). Reusing one context and one timer keeps
	// calls allocation-free.
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer

	stderr *stderrHead // what the guest wrote to stderr in the last call

	// host is what the host functions (state stores) work with; ctx
	// carries it.
	host *hostState

	dec    decoder // scratch for parsing output, reused
	arena  arena   // memory for output bytes and headers
	broken bool    // trapped, timed out or garbled: discard, never reuse
}

// instantiate starts a new instance of the compiled module and runs its
// _initialize (a Go guest's runtime and package init).
func (t *Transform) instantiate() (*instance, error) {
	stderr := &stderrHead{}
	host := &hostState{t: t, open: make([]transform.Store, len(t.stores))}
	base := context.WithValue(context.Background(), hostKey{}, host)
	ctx, cancel := context.WithTimeout(base, startTimeout)
	defer cancel()
	mod, err := t.rt.InstantiateModule(ctx, t.compiled, t.modCfg.WithStderr(stderr))
	if err != nil {
		if msg := stderr.String(); msg != "" {
			return nil, fmt.Errorf("%w (guest stderr: %s)", err, msg)
		}
		return nil, err
	}
	inst := &instance{
		t:         t,
		mod:       mod,
		mem:       mod.Memory(),
		versionFn: mod.ExportedFunction("processor_abi_version"),
		allocFn:   mod.ExportedFunction("processor_alloc"),
		processFn: mod.ExportedFunction("processor_process"),
		closedFn:  mod.ExportedFunction(closedExport),
		stderr:    stderr,
		host:      host,
	}
	inst.dec.mem, inst.dec.maxBytes = inst.mem, t.maxBytes
	if len(t.stores) > 0 {
		inst.dec.commit = host.commit
	}
	inst.ctx, inst.cancel = context.WithCancel(base)
	inst.timer = time.AfterFunc(time.Hour, inst.cancel)
	inst.timer.Stop()
	return inst, nil
}

// close stops the instance's timer and closes its module.
func (inst *instance) close() {
	inst.timer.Stop()
	inst.cancel()
	_ = inst.mod.Close(context.Background())
}

// arm starts the deadline of one use of the instance: every guest call
// until disarm shares it, so the TIMEOUT setting bounds the guest's
// time per record (processor_alloc and processor_process together), not
// per call.
func (inst *instance) arm() {
	inst.stderr.reset()
	if inst.t.timeout > 0 {
		inst.timer.Reset(inst.t.timeout)
	}
}

// disarm stops the deadline. If it has fired, possibly just after the
// guest returned, the context is cancelled for good: the instance is
// broken and the record fails with ErrTimeout.
func (inst *instance) disarm() error {
	if inst.t.timeout > 0 && !inst.timer.Stop() {
		inst.broken = true
		return inst.timedOut()
	}
	return nil
}

func (inst *instance) timedOut() error {
	return &settings.Message{Err: ErrTimeout,
		Text: settings.Say(ErrTimeout.Error()+": stopped after ", settings.Ref("TIMEOUT"), "="+inst.t.timeout.String())}
}

// call runs f under the deadline arm started. An error marks the
// instance broken: after a trap or a deadline the guest's state is
// unknown.
func (inst *instance) call(f api.Function) error {
	err := f.CallWithStack(inst.ctx, inst.stack[:])
	if err == nil {
		return nil
	}
	inst.broken = true
	if inst.ctx.Err() != nil {
		return inst.timedOut()
	}
	if inst.host.fault != nil {
		return inst.host.fault
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("%w: the guest exited with code %d", ErrTrap, exit.ExitCode())
	} else {
		err = fmt.Errorf("%w: %s", ErrTrap, firstLine(err))
	}
	if msg := inst.stderr.String(); msg != "" {
		err = fmt.Errorf("%w (guest stderr: %s)", err, msg)
	}
	return err
}

// abiVersion calls processor_abi_version.
func (inst *instance) abiVersion() (uint32, error) {
	inst.arm()
	err := inst.call(inst.versionFn)
	if derr := inst.disarm(); err == nil {
		err = derr
	}
	if err != nil {
		return 0, err
	}
	return uint32(inst.stack[0]), nil
}

// minInput is the smallest input buffer the host asks for, so that most
// records never need a second processor_alloc.
const minInput = 4 << 10

// inputView returns n writable bytes of the guest's input buffer, asking
// the guest for a bigger one first when needed.
func (inst *instance) inputView(n uint32) ([]byte, error) {
	if n > inst.inCap {
		size := max(minInput, n)
		if size < 1<<30 {
			size = 1 << bits.Len32(size-1) // the next power of two
		}
		inst.stack[0] = uint64(size)
		if err := inst.call(inst.allocFn); err != nil {
			return nil, fmt.Errorf("processor_alloc(%d): %w", size, err)
		}
		ptr := uint32(inst.stack[0])
		if ptr == 0 || uint64(ptr)+uint64(size) > uint64(inst.mem.Size()) {
			inst.broken = true
			return nil, fmt.Errorf("%w: processor_alloc(%d) returned address %d, outside its %d bytes of memory", ErrBadOutput, size, ptr, inst.mem.Size())
		}
		inst.inPtr, inst.inCap = ptr, size
	}
	b, ok := inst.mem.Read(inst.inPtr, n)
	if !ok {
		inst.broken = true
		return nil, fmt.Errorf("%w: the input buffer at %d is outside the guest's memory", ErrBadOutput, inst.inPtr)
	}
	return b, nil
}

// process runs one record through the guest and appends its outputs. ctx
// is the record's, which carries its state stores. A store error fails the
// record whatever the guest made of it; the record's writes reach the
// stores only when it succeeds (the decoder's commit, once its output is
// known to be good).
func (inst *instance) process(ctx context.Context, src record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	n, err := inputSize(src, rec)
	if err != nil {
		return out, err
	}
	hs := inst.host
	hs.begin(ctx, src.Partition)
	defer hs.end()
	inst.arm()
	err = inst.run(src, rec, n)
	if derr := inst.disarm(); err == nil {
		err = derr
	}
	if err != nil {
		return out, err
	}
	if hs.err != nil {
		return out, hs.err
	}
	inst.dec.maxRecord = inst.t.maxRecord.Load()
	res, err := inst.dec.decode(uint32(inst.stack[0]), src, rec, out, &inst.arena)
	if err != nil && errors.Is(err, ErrBadOutput) {
		inst.broken = true
	}
	return res, err
}

// run writes the input of n bytes into the guest and calls
// processor_process, which leaves the result's address in stack[0].
func (inst *instance) run(src record.Source, rec *kgo.Record, n uint32) error {
	buf, err := inst.inputView(n)
	if err != nil {
		return err
	}
	encodeInput(buf, src, rec)
	inst.stack[0], inst.stack[1] = uint64(inst.inPtr), uint64(n)
	return inst.call(inst.processFn)
}

// stderrHead keeps the first bytes a guest wrote to stderr since the last
// reset, for error messages: a Go guest's runtime prints why it died there
// ("panic: ...", "fatal error: out of memory"). The guest writes from the
// calling goroutine, so it needs no lock.
type stderrHead struct{ buf []byte }

const stderrMax = 512

func (h *stderrHead) Write(p []byte) (int, error) {
	if room := stderrMax - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *stderrHead) reset() { h.buf = h.buf[:0] }

// String returns the kept output up to its first blank line (a Go
// guest's goroutine dump follows one), on one line.
func (h *stderrHead) String() string {
	s, _, _ := strings.Cut(string(h.buf), "\n\n")
	return strings.Join(strings.Fields(s), " ")
}

// firstLine returns err's message up to its first newline: wazero's errors
// carry guest stack traces, and configuration errors are one line.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
