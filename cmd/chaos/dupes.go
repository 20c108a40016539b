package main

import (
	"fmt"
	"time"
)

// In the dedupe mode (dedupe in -transforms, by the inputs' seq) every
// -dup-every'th input (but a marked one, -poison-every) is not a new one
// but a re-send of a recent ordinary input: the same key and value, so the same seq and partition,
// later in its partition's offset order. Every other such duplicate is
// stamped dupLateBy back, beyond the drill's dedupe GRACE (dedupeGrace):
// it is late, and goes to the late topic; the others are stamped now,
// well within the dedupe's WINDOW (24h) of their original, and must be
// filtered. eoscheck -check dedupe replays the input through a model of
// the dedupe and judges both.

const (
	// dedupeGrace is the drill's PROCESSOR_DEDUPE_GRACE.
	dedupeGrace = time.Minute
	// dupLateBy is how far back a late duplicate is stamped.
	dupLateBy = 10 * time.Minute
	// dupRecent is how many recent ordinary inputs a duplicate is drawn
	// from.
	dupRecent = 64
)

// dupFields are the duplicates' state in the input maker.
type dupFields struct {
	recent     [dupRecent]sentInput // a ring of recent ordinary inputs
	n          int                  // how many were kept so far
	dups, late int                  // duplicates made, of them late
}

// sentInput is an ordinary input's key and value.
type sentInput struct {
	key   string
	value []byte
}

// duplicates reports whether the drill re-sends inputs (-dup-every in
// the dedupe mode).
func (o options) duplicates() bool { return o.counter() == "dedupe" && o.dupEvery > 0 }

// duplicate returns input i when it is a duplicate: a recent ordinary
// input's key and value, and the time to stamp it with (zero: the
// producer's clock); ok is false for an input that is not one.
func (m *inputMaker) duplicate(i int) (key string, value []byte, ts time.Time, ok bool) {
	o := m.d.o
	poison := o.poisonEvery > 0 && i%o.poisonEvery == o.poisonEvery-1 // a marked one stays marked
	if !o.duplicates() || i%o.dupEvery != o.dupEvery-1 || m.dup.n == 0 || poison {
		return "", nil, time.Time{}, false
	}
	orig := m.dup.recent[m.rng.IntN(min(m.dup.n, dupRecent))]
	m.dup.dups++
	if m.dup.dups%2 == 0 {
		m.dup.late++
		ts = time.Now().Add(-dupLateBy)
	}
	return orig.key, orig.value, ts, true
}

// remember keeps an ordinary input for later duplicates.
func (m *inputMaker) remember(key string, value []byte) {
	if m.d.o.duplicates() {
		m.dup.recent[m.dup.n%dupRecent] = sentInput{key: key, value: value}
		m.dup.n++
	}
}

// dupSummary renders the duplicates written, for the report.
func (m *inputMaker) dupSummary() string {
	return fmt.Sprintf("%d re-sent (every %d inputs one, of a recent input's seq), %d of them stamped %s back: late beyond the dedupe's GRACE %s",
		m.dup.dups, m.d.o.dupEvery, m.dup.late, dupLateBy, dedupeGrace)
}
