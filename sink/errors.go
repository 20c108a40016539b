package sink

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/streamproc/processor/record"
)

// FencedError is returned by Commit when the stored next offset of at
// least one partition was not the batch's OffsetUpdate.Expected: another
// instance (or an earlier attempt of this one whose commit was
// acknowledged too late) committed past it. Nothing of the batch was
// written. The caller must not retry the batch: it reloads the offsets
// (Offsets) and resumes each partition from there.
type FencedError struct {
	// From names the destination's package, the prefix of Error's line
	// (e.g. "pgsink"); none when empty.
	From string
	// Partitions are all the batch's partitions whose update failed,
	// ordered by topic and partition.
	Partitions []record.TopicPartition
	// Stored are their next offsets as stored right after the rollback
	// (absent: none stored); nil if they could not be read.
	Stored map[record.TopicPartition]int64
}

// Error lists the fenced partitions and what is stored for them.
func (e *FencedError) Error() string {
	var b strings.Builder
	b.WriteString(prefix(e.From) + "fenced: the stored offsets of ")
	for i, tp := range e.Partitions {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tp.String())
		if e.Stored != nil {
			if n, ok := e.Stored[tp]; ok {
				b.WriteString(" (now " + strconv.FormatInt(n, 10) + ")")
			} else {
				b.WriteString(" (now none)")
			}
		}
	}
	b.WriteString(" are not the ones this batch started from: another instance committed them; nothing was written, resume from the stored offsets")
	return b.String()
}

// RowError is one row of a batch that the destination refused (a
// constraint violation, a bad cast, a value that is not JSON where JSON is
// wanted). Nothing of the batch was written; the caller applies its error
// policy to that row's input record and commits the batch again.
type RowError struct {
	// From names the destination's package, the prefix of Error's line.
	From string
	// Index is the row's index in Batch.Rows, or in Batch.DeadLetters when
	// DeadLetter is true.
	Index int
	// DeadLetter tells that the row was a dead letter.
	DeadLetter bool
	// Input is the row's input record.
	Input record.Source
	// Err is why, as the destination said it.
	Err error
}

// Error says which row, from which input record, and why.
func (e *RowError) Error() string {
	what := "output row"
	if e.DeadLetter {
		what = "dead letter"
	}
	in := e.Input.Topic + "/" + strconv.FormatInt(int64(e.Input.Partition), 10) + "@" + strconv.FormatInt(e.Input.Offset, 10)
	return fmt.Sprintf("%s%s %d (input %s) refused: %v", prefix(e.From), what, e.Index, in, e.Err)
}

// Unwrap returns Err.
func (e *RowError) Unwrap() error { return e.Err }

// PersistentError is a failure of Commit that repeated in a row, that no
// retry is expected to fix and that is no row's fault: a table or column
// that is gone, a privilege revoked, a read-only server, an unknown error
// of the destination. Nothing of the batch was written. The processor
// stops (exit code 1) with one line naming the setting to check.
type PersistentError struct {
	// From names the destination's package, the prefix of Error's line;
	// Destination names what was committed to, e.g. "PostgreSQL".
	From, Destination string
	// Setting is the destination's setting to check (as declared in its
	// Settings, e.g. "TABLE"), or "" when no setting is to blame.
	Setting string
	// Check says what to look at.
	Check string
	// Attempts is how many commits failed so.
	Attempts int
	// Detail is the last failure as the destination describes it; Err's
	// message when empty.
	Detail string
	// Err is the last failure.
	Err error
}

// Error is Line with each setting shown as "setting NAME".
func (e *PersistentError) Error() string {
	return e.Line(func(s string) string { return "setting " + s })
}

// Line is one line: the failure, how many times, and what to check, the
// setting named by name (the host binds it to its variable).
func (e *PersistentError) Line(name func(setting string) string) string {
	detail := e.Detail
	if detail == "" && e.Err != nil {
		detail = e.Err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%scommitting to %s failed %d times in a row with the same error, which retrying does not fix: %s",
		prefix(e.From), e.Destination, e.Attempts, detail)
	switch {
	case e.Setting != "" && e.Check != "":
		b.WriteString("; check " + name(e.Setting) + ": " + e.Check)
	case e.Setting != "":
		b.WriteString("; check " + name(e.Setting))
	case e.Check != "":
		b.WriteString("; check " + e.Check)
	default:
		b.WriteString("; check the server's log")
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// Unwrap returns Err.
func (e *PersistentError) Unwrap() error { return e.Err }

func prefix(from string) string {
	if from == "" {
		return ""
	}
	return from + ": "
}
