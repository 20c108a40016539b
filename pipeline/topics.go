package pipeline

import (
	"context"
	"fmt"
	"time"
)

// MissingTopicsError names required topics that do not exist: at start
// (Run checks Options.RequireTopics before the loop), or, with Deleted,
// found missing while running (the topic was deleted), which no retry
// can fix: every transaction would abort.
type MissingTopicsError struct {
	Topics  []string
	Deleted bool
}

func (e *MissingTopicsError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("topics %v do not exist any more; create them again", e.Topics)
	}
	return fmt.Sprintf("topics %v do not exist; create them before starting the processor", e.Topics)
}

// checkTopics fails on missing required topics. A cluster that cannot
// answer is not a reason to stop: the loop finds out soon enough.
func (p *Pipeline) checkTopics(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	missing, err := p.s.MissingTopics(cctx, p.o.RequireTopics)
	if err != nil {
		p.log.Warn("could not check that the output topics exist", "err", err.Error())
		return nil
	}
	if len(missing) > 0 {
		return &MissingTopicsError{Topics: missing}
	}
	return nil
}
