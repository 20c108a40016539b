//go:build !race

package state

// raceEnabled says that the race detector is on: it multiplies memory and
// CPU, so measurements of them are left out.
const raceEnabled = false
