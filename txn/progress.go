package txn

import (
	"strconv"
	"strings"
)

// Progress is what the processor keeps of one input partition in the
// metadata string of the group's committed offset: the per-partition
// progress that must survive a crash, beside the offset it belongs to.
// That is the count of crash attempts (see crashes.go) and the
// partition's stream time (see streamtime.go; docs/design.md, "Committed
// offset metadata").
//
// The zero Progress is "nothing known": what metadata that another tool
// wrote reads as, or none, or franz-go's default (the member ID), or a
// string of another version of the format.
type Progress struct {
	// Crashes is how many attempts at the records from At on were begun
	// and never ended: each died with its process. 0: none known.
	Crashes int
	// At is the committed offset Crashes belongs to; metadata whose At is
	// not the offset it is committed with reads as nothing known.
	At int64
	// Extent is the last offset those attempts polled: the crash was
	// caused by a record in [At, Extent], if by a record at all.
	Extent int64
	// Solo, when Alone, is the offset of the record that was being run
	// alone, in a transaction of its own, when the marker was written:
	// had the process died, that record killed it.
	Solo  int64
	Alone bool
	// Time, when Timed, is the partition's stream time at committed
	// offset TimeAt: the largest (bounded) timestamp of its records
	// before that offset, in Unix milliseconds. Like the crash count it
	// belongs to one offset: copied onto another, it reads as unknown.
	Time   int64
	TimeAt int64
	Timed  bool
	// extra are the fields of this version that this code does not know,
	// as written ("name=value"): a rewrite keeps them, so that a field
	// added later survives code that predates it.
	extra []string
}

// progressVersion opens every metadata string of the format: a reader
// that meets another opening (another major version, or another tool's
// metadata) reads nothing known.
const progressVersion = "sp1"

// maxProgressLen bounds what ParseProgress reads: Kafka's default
// offset.metadata.max.bytes is 4096.
const maxProgressLen = 4096

// Known reports whether p says anything.
func (p Progress) Known() bool { return p.Crashes > 0 || p.Timed || len(p.extra) > 0 }

// String encodes p: "sp1", then ";name=value" fields, the known ones
// first in a fixed order, then the unknown ones as read. Nothing known
// encodes as "".
//
//	sp1;c=2@1200;e=1450        2 crashes at offset 1200, records up to 1450 polled
//	sp1;c=3@1300;e=1450;s=1302 the same window, record 1302 being run alone
//	sp1;t=1733450000000@1300   stream time 1733450000000 at offset 1300
func (p Progress) String() string {
	if !p.Known() {
		return ""
	}
	b := []byte(progressVersion)
	if p.Crashes > 0 {
		b = append(b, ";c="...)
		b = strconv.AppendInt(b, int64(p.Crashes), 10)
		b = append(b, '@')
		b = strconv.AppendInt(b, p.At, 10)
		b = append(b, ";e="...)
		b = strconv.AppendInt(b, p.Extent, 10)
		if p.Alone {
			b = append(b, ";s="...)
			b = strconv.AppendInt(b, p.Solo, 10)
		}
	}
	if p.Timed {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, p.Time, 10)
		b = append(b, '@')
		b = strconv.AppendInt(b, p.TimeAt, 10)
	}
	for _, f := range p.extra {
		b = append(b, ';')
		b = append(b, f...)
	}
	return string(b)
}

// ParseProgress reads metadata written by Progress.String. Anything
// else (another tool's metadata, another version, a damaged string)
// reads as the zero Progress, never as an error: the processor then
// knows nothing of the partition, as before this format existed. A known
// field whose value does not parse, or that contradicts the others,
// drops the crash count (or the stream time, for "t"); unknown fields
// are kept.
func ParseProgress(s string) Progress {
	if len(s) > maxProgressLen {
		return Progress{}
	}
	rest, ok := strings.CutPrefix(s, progressVersion)
	if !ok || (rest != "" && rest[0] != ';') {
		return Progress{}
	}
	var p Progress
	if rest == "" {
		return p
	}
	var crash, extent, solo, bad, timed, badTime bool
	for f := range strings.SplitSeq(rest[1:], ";") {
		name, val, ok := strings.Cut(f, "=")
		if !ok || !validFieldName(name) {
			return Progress{} // not name=value: not this format
		}
		switch name {
		case "c":
			n, at, ok := strings.Cut(val, "@")
			c, err1 := strconv.Atoi(n)
			o, err2 := strconv.ParseInt(at, 10, 64)
			crash, bad = true, bad || crash || !ok || err1 != nil || err2 != nil || c <= 0 || o < 0
			p.Crashes, p.At = c, o
		case "e":
			o, err := strconv.ParseInt(val, 10, 64)
			extent, bad = true, bad || extent || err != nil
			p.Extent = o
		case "s":
			o, err := strconv.ParseInt(val, 10, 64)
			solo, bad = true, bad || solo || err != nil
			p.Solo, p.Alone = o, true
		case "t":
			ms, at, ok := strings.Cut(val, "@")
			t, err1 := strconv.ParseInt(ms, 10, 64)
			o, err2 := strconv.ParseInt(at, 10, 64)
			badTime = badTime || timed || !ok || err1 != nil || err2 != nil || t < 0 || o < 0
			timed, p.Time, p.TimeAt, p.Timed = true, t, o, true
		default:
			if len(p.extra) >= 16 {
				return Progress{}
			}
			p.extra = append(p.extra, f)
		}
	}
	if bad || !crash || !extent || p.Extent < p.At || (solo && (p.Solo < p.At || p.Solo > p.Extent)) {
		p.Crashes, p.At, p.Extent, p.Solo, p.Alone = 0, 0, 0, 0, false
	}
	if badTime {
		p.Time, p.TimeAt, p.Timed = 0, 0, false
	}
	return p
}

// validFieldName reports whether name is a field name of the format: one
// to eight lower-case ASCII letters.
func validFieldName(name string) bool {
	if name == "" || len(name) > 8 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 'a' || name[i] > 'z' {
			return false
		}
	}
	return true
}

// crashesAt is p's crash count if it belongs to committed offset at (the
// offset p was read with), else 0.
func (p Progress) crashesAt(at int64) int {
	if p.Crashes > 0 && p.At == at {
		return p.Crashes
	}
	return 0
}

// withoutCrashes is p with nothing of the crash count: what a commit that
// made progress writes, keeping the stream time and the fields of others.
func (p Progress) withoutCrashes() Progress {
	return Progress{Time: p.Time, TimeAt: p.TimeAt, Timed: p.Timed, extra: p.extra}
}

// TimeAtOffset is p's stream time if it belongs to committed offset at
// (the offset p was read with).
func (p Progress) TimeAtOffset(at int64) (int64, bool) {
	if p.Timed && p.TimeAt == at {
		return p.Time, true
	}
	return 0, false
}

// Detached is p without what belongs to the offset it was committed with
// (the crash count and the stream time), keeping the fields of others:
// what a tool that moves the committed offset elsewhere writes, so that
// nothing measured at the old offset is read as true at the new one.
func (p Progress) Detached() Progress { return Progress{extra: p.extra} }
