package offsets

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is what a reset's Target names.
type Kind int

// The kinds of target.
const (
	Earliest Kind = iota // the log start offset
	Latest               // the log end offset (high watermark): skip everything there is
	AtTime               // the first offset whose timestamp is at or after Target.Time
	AtOffset             // Target.Offset, clamped to [log start, log end]
)

// Target is where a reset moves the committed offsets.
type Target struct {
	Kind   Kind
	Time   time.Time // AtTime
	Offset int64     // AtOffset
	text   string
}

// String is the target as the user wrote it.
func (t Target) String() string { return t.text }

// TargetWant says what ParseTarget takes, for errors and usage.
const TargetWant = "earliest, latest, an RFC 3339 time (2026-12-06T07:00:00Z), a duration back from now (-1h, -90m), or an offset (a non-negative integer)"

// ParseTarget reads a reset target: earliest, latest, an RFC 3339 time,
// a negative Go duration (how far back from now: -1h is the first offset
// stamped at or after an hour ago) or an offset. A duration is resolved
// against now once, so that every partition moves to the same instant.
func ParseTarget(s string, now time.Time) (Target, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "earliest":
		return Target{Kind: Earliest, text: "earliest"}, nil
	case "latest":
		return Target{Kind: Latest, text: "latest"}, nil
	}
	if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Target{Kind: AtTime, Time: ts, text: s}, nil
	}
	if strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s)
		if err != nil || d >= 0 {
			return Target{}, fmt.Errorf("-to %q: want %s", s, TargetWant)
		}
		return Target{Kind: AtTime, Time: now.Add(d), text: s}, nil
	}
	if o, err := strconv.ParseInt(s, 10, 64); err == nil && o >= 0 {
		return Target{Kind: AtOffset, Offset: o, text: s}, nil
	}
	return Target{}, fmt.Errorf("-to %q: want %s", s, TargetWant)
}
