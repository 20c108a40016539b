package main

import (
	"errors"
	"fmt"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// parseGroupBy reads -group-by into c, after the checks it serves were
// parsed: it needs -check aggregate or windows, and windows judged by a
// group (behind a repartition hop) are tumbling ones only.
func parseGroupBy(c *config, groupBy string) error {
	var err error
	if c.opts.GroupBy, err = check.ParseGroupPath(groupBy); err != nil {
		return fmt.Errorf("-group-by %w", err)
	}
	if len(c.opts.GroupBy) > 0 && !c.aggregate && c.opts.Windows == nil {
		return errors.New("-group-by needs -check aggregate or windows")
	}
	if w := c.opts.Windows; w != nil && len(c.opts.GroupBy) > 0 && w.Advance != 0 && w.Advance != w.Size {
		return errors.New("-check windows with -group-by judges tumbling windows only (-window-advance 0)")
	}
	return nil
}
