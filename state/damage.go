package state

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
)

// The local store is a cache of the changelogs, so a damaged one is not a
// reason to stop: Open wipes it and every partition is rebuilt from its
// changelog by the next Restore. Damage shows in three places:
//
//   - Pebble refuses to open the directory: a table cut short or missing
//     (Pebble checks every table's size at open), an empty or malformed
//     MANIFEST, OPTIONS it cannot parse.
//   - A read or a write of the open store fails as corrupt (a table's
//     checksum): the operation's error marks the directory (damageMarker)
//     before it is returned, the processor stops, and the next Open finds
//     the mark.
//   - Pebble cannot go on (a compaction reading a corrupt table): its
//     logger's Fatalf marks the directory and ends the process through
//     Options.OnFatal (status 1 by default, as Pebble's own logger).
//
// What a rebuild will not fix is not treated as damage: a directory that
// cannot be created or written (permissions, a read-only filesystem, a
// file where the directory must be, a full disk) is a *DirError, and a
// directory another process holds (Pebble's lock) an error of its own.

// damageMarker is the file that marks the directory as damaged.
const damageMarker = "PROCESSOR-STATE-DAMAGED"

// DirError says that the local store's directory cannot be used for a
// reason a rebuild will not fix: it cannot be created, read or written,
// or its filesystem is full or read-only. The wiring turns it into exit
// code 2 with one line naming PROCESSOR_STATE_DIR.
type DirError struct {
	Dir string
	Err error
}

// Error names the directory and the operating system's reason.
func (e *DirError) Error() string {
	return fmt.Sprintf("state: the local store's directory %s cannot be used: %v", e.Dir, e.Err)
}

// Unwrap returns the operating system's error.
func (e *DirError) Unwrap() error { return e.Err }

// unfixable reports whether err is the filesystem's refusal, which wiping
// the directory would not change.
func unfixable(err error) bool {
	for _, e := range []error{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOSPC,
		syscall.EDQUOT, syscall.ENOTDIR, syscall.EISDIR, syscall.ENAMETOOLONG, syscall.ELOOP} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// transient reports whether err is a condition of the moment (the
// directory locked by another process, the process out of files or
// memory), which neither a rebuild nor the operator's configuration fixes.
func transient(err error) bool {
	for _, e := range []error{syscall.EAGAIN, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return strings.Contains(err.Error(), "lock held")
}

// wipe is why openStore wiped a local store: reason is the
// processor_state_rebuilds_total reason its partitions rebuild with
// ("damaged", or "layout" for a store of an older key layout), "" when
// it was not wiped; detail says what was found.
type wipe struct{ reason, detail string }

// openStore opens the local store in dir, creating it if missing; a
// damaged store, or one of an older key layout, is wiped and opened
// empty, with why.
func openStore(dir string, cacheBytes int64, onFatal func(error)) (*local, wipe, error) {
	l, damaged, err := openOrWipe(dir, cacheBytes, onFatal)
	switch {
	case damaged == nil:
		return l, wipe{}, err
	case errors.Is(damaged, errOldLayout):
		return l, wipe{reason: "layout", detail: damaged.Error()}, err
	}
	return l, wipe{reason: "damaged", detail: strings.Join(strings.Fields(damaged.Error()), " ")}, err
}

// openOrWipe is openStore, with the error that made it wipe the store.
func openOrWipe(dir string, cacheBytes int64, onFatal func(error)) (l *local, damaged error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, &DirError{Dir: dir, Err: err}
	}
	if b, err := os.ReadFile(filepath.Join(dir, damageMarker)); err == nil {
		damaged = errors.New(cmp.Or(strings.TrimSpace(string(b)), "marked damaged"))
	} else {
		l, err = openLocal(dir, cacheBytes, onFatal)
		switch {
		case err == nil:
			return l, nil, nil
		case unfixable(err):
			return nil, nil, &DirError{Dir: dir, Err: err}
		case transient(err):
			return nil, nil, err
		}
		damaged = err
	}
	if err := wipeDir(dir); err != nil {
		return nil, nil, err
	}
	l, err = openLocal(dir, cacheBytes, onFatal)
	if err != nil && unfixable(err) {
		return nil, nil, &DirError{Dir: dir, Err: err}
	}
	return l, damaged, err
}

// pebbleFile reports whether name is one of the files Pebble keeps in its
// directory, or the damage marker.
func pebbleFile(name string) bool {
	for _, p := range []string{"MANIFEST-", "OPTIONS-", "marker.", "CURRENT", "LOCK", "temporary.", damageMarker} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, s := range []string{".sst", ".log", ".blob", ".dbtmp"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// wipeDir deletes Pebble's files in dir, the damage marker last, and
// leaves anything else there alone.
func wipeDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return &DirError{Dir: dir, Err: err}
	}
	for _, e := range entries {
		if e.Name() == damageMarker || !pebbleFile(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return &DirError{Dir: dir, Err: err}
		}
	}
	if err := os.Remove(filepath.Join(dir, damageMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return &DirError{Dir: dir, Err: err}
	}
	return nil
}

// markDamaged writes the damage marker into dir, with why, so that the
// next Open rebuilds the store; it is best effort (the disk may be what
// failed).
func markDamaged(dir, why string) {
	_ = os.WriteFile(filepath.Join(dir, damageMarker), []byte(why+"\n"), 0o644)
}

// checked marks l's directory damaged when err says the store is corrupt,
// and returns err.
func (l *local) checked(err error) error {
	if err != nil && errors.Is(err, pebble.ErrCorruption) {
		markDamaged(l.dir, err.Error())
	}
	return err
}

// storeLogger drops Pebble's informational lines and keeps its errors out
// of the process's stdout: failures reach the caller as errors. Pebble
// calls Fatalf when it cannot go on (a background compaction that found a
// corrupt table, a MANIFEST it cannot write); Fatalf must not return. It
// marks the directory damaged, unless the failure is one a rebuild will
// not fix (a full or read-only filesystem: a *DirError), and hands the
// error to onFatal (Options.OnFatal), which ends the process.
type storeLogger struct {
	dir     string
	onFatal func(error)
}

func (storeLogger) Infof(string, ...any)  {}
func (storeLogger) Errorf(string, ...any) {}
func (l storeLogger) Fatalf(format string, args ...any) {
	// Pebble's message carries its error's causes and stacks, numbered
	// from "(1)": the line before them says what failed.
	msg, _, _ := strings.Cut(strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " "), " (1) ")
	var err error = fmt.Errorf("state: the local store in %s failed: %s", l.dir, msg)
	for _, a := range args {
		if e, ok := a.(error); ok && unfixable(e) {
			err = &DirError{Dir: l.dir, Err: causeError{msg: msg, err: e}}
		}
	}
	var de *DirError
	if !errors.As(err, &de) {
		markDamaged(l.dir, msg)
		err = fmt.Errorf("%w (it is rebuilt from the changelogs at the next start)", err)
	}
	if l.onFatal != nil {
		l.onFatal(err)
	}
	fmt.Fprintln(os.Stderr, err.Error())
	os.Exit(1) // onFatal did not end the process
}

// causeError is a message that already says its cause, which it wraps.
type causeError struct {
	msg string
	err error
}

func (e causeError) Error() string { return e.msg }
func (e causeError) Unwrap() error { return e.err }
