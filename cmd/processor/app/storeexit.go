package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/state"
)

// exitOnStateFailure is the OnFatal of the state stores and the join
// tables: their local store failed where it cannot go on, and the
// process exits as storeExit says: 2 for a directory that cannot be
// used, 1 (rebuilt at the next start) for damage.
func exitOnStateFailure(log *slog.Logger) func(error) {
	return func(err error) { os.Exit(storeExit(err, log)) }
}

// storeExit is the exit code of a failure of the local stores, logged
// unless it is a configuration error (configError): of the state stores
// (openState) or the repartition topic (openHop), of the join tables
// (openTables: a table that does not exist or whose partitions do not
// match the input's), or of either kind of store while the processor
// runs (exitOnStateFailure). One function, so that a store fails the
// same way whichever stage keeps it.
func storeExit(err error, log *slog.Logger) int {
	var pe *joinPartitionsError
	if errors.As(err, &pe) {
		return configError(pe)
	}
	var se *settings.Error
	if errors.As(err, &se) {
		return configError(se)
	}
	var dirErr *state.DirError
	if errors.As(err, &dirErr) {
		return configError(&settings.Error{Var: config.EnvName("STATE_DIR"), Value: dirErr.Dir,
			Want: settings.Say("a directory the processor can create, read and write, on a writable filesystem with room (" +
				oneLine(dirErr.Err.Error()) + ")")})
	}
	var hopMismatch *state.RepartitionMismatchError
	if errors.As(err, &hopMismatch) {
		return configError(hopMismatch)
	}
	var mismatch *state.MismatchError
	if errors.As(err, &mismatch) {
		if mismatch.PartitionsChanged() {
			return configError(fmt.Errorf("%w; to keep the state, start the chain again under a new %s: "+
				"a new group reads the input from its start and rebuilds every store (and writes every output again); "+
				"to start empty, delete the changelog topics %s: every key starts from nothing at the group's committed offsets",
				mismatch, config.EnvName("GROUP"), strings.Join(mismatch.Changelogs, ", ")))
		}
		return configError(mismatch)
	}
	log.Error("stopping: " + err.Error())
	return exitRuntime
}
