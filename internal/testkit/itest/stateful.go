package itest

import (
	"regexp"
	"strconv"
	"time"

	"github.com/streamproc/processor/internal/launch"
)

// Stateful sets inst to run chain with its state in dir, with ordering,
// two workers and injected aborts at abortRate.
func Stateful(dir, ordering, abortRate string, chain []string, settings map[string]string) func(*launch.Instance) {
	return func(inst *launch.Instance) {
		inst.Transforms, inst.Settings, inst.Workers = chain, settings, 2
		inst.CommitInterval = 100 * time.Millisecond
		inst.Extra = append(inst.Extra, "PROCESSOR_STATE_DIR="+dir, "PROCESSOR_ORDERING="+ordering,
			"PROCESSOR_TEST_ABORT_RATE="+abortRate)
	}
}

var restoredLine = regexp.MustCompile(`msg="state restored".* records=(\d+) .*rebuilt=(true|false)`)

// Restored sums the changelog records p's restores read, and says whether
// any was a rebuild.
func Restored(p *Proc) (records int, rebuilt bool) {
	for _, m := range restoredLine.FindAllStringSubmatch(p.Logs.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		records += n
		rebuilt = rebuilt || m[2] == "true"
	}
	return records, rebuilt
}
