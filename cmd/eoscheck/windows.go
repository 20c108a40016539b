package main

import (
	"errors"
	"fmt"
	"slices"
)

// parseWindows sets up -check windows.
func parseWindows(c *config) error {
	w := c.windows
	switch {
	case c.tables.URL != "" || c.opts.AtLeastOnce || c.opts.OneToOne:
		return errors.New("-check windows needs a run into Kafka, exactly once, and -one-to-one=false (EMIT=close emits one row per window, not per input)")
	case w.Size <= 0:
		return errors.New("-check windows needs -window, the aggregate's WINDOW")
	case w.Advance < 0 || w.Advance > w.Size || w.Grace < 0:
		return fmt.Errorf("-window-advance %s must be within -window %s, and -grace %s not negative", w.Advance, w.Size, w.Grace)
	}
	if w.LateTopic != "" && !slices.Contains(c.outputs, w.LateTopic) {
		c.outputs = append(c.outputs, w.LateTopic)
	}
	c.opts.Windows = &c.windows
	return nil
}
