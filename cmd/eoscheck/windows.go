package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// dedupeFlags are the flags of -check dedupe.
func dedupeFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.dedupeBy, "dedupe-by", "", "with -check dedupe: the dedupe's BY, a path of object members of the input values such as .seq (required)")
	fs.DurationVar(&c.dedupe.Window, "dedupe-window", 24*time.Hour, "with -check dedupe: the dedupe's WINDOW")
	fs.DurationVar(&c.dedupe.Grace, "dedupe-grace", time.Hour, "with -check dedupe: the dedupe's GRACE")
}

// parseDedupe sets up -check dedupe; the late topic is -late-topic's.
func parseDedupe(c *config) error {
	p, err := check.ParseGroupPath(c.dedupeBy)
	switch {
	case err != nil:
		return fmt.Errorf("-dedupe-by %w", err)
	case len(p) == 0:
		return errors.New("-check dedupe needs -dedupe-by, the dedupe's BY (a path such as .seq)")
	case c.tables.URL != "" || c.opts.AtLeastOnce || c.opts.OneToOne:
		return errors.New("-check dedupe needs a run into Kafka, exactly once, and -one-to-one=false (a dedupe filters its duplicates)")
	case c.dedupe.Window <= 0 || c.dedupe.Grace < 0:
		return fmt.Errorf("-dedupe-window %s must be positive, and -dedupe-grace %s not negative", c.dedupe.Window, c.dedupe.Grace)
	}
	c.dedupe.LateTopic = c.windows.LateTopic
	if c.dedupe.LateTopic != "" && !slices.Contains(c.outputs, c.dedupe.LateTopic) {
		c.outputs = append(c.outputs, c.dedupe.LateTopic)
	}
	c.opts.Dedupe = &c.dedupe
	return nil
}

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

// windowFlags declares the flags of -check windows.
func windowFlags(fs *flag.FlagSet, c *config) {
	fs.DurationVar(&c.windows.Size, "window", 0, "with -check windows: the aggregate's WINDOW")
	fs.DurationVar(&c.windows.Advance, "window-advance", 0, "with -check windows: the aggregate's WINDOW_ADVANCE (0: tumbling)")
	fs.DurationVar(&c.windows.Grace, "grace", 0, "with -check windows: the aggregate's GRACE")
	fs.StringVar(&c.windows.LateTopic, "late-topic", "", "with -check windows or dedupe: the processor's PROCESSOR_LATE_TOPIC (unset: late inputs were dropped, or with dedupe passed on)")
}

// parseChecks sets the extra checks of -check (checks) in c.
func parseChecks(c *config, checks string) error {
	for _, name := range split(checks) {
		if !slices.Contains(knownChecks, name) {
			return fmt.Errorf("unknown check %q in -check (known: %s)", name, strings.Join(knownChecks, ", "))
		}
		switch name {
		case "windows":
			if err := parseWindows(c); err != nil {
				return err
			}
			continue
		case "dedupe":
			if err := parseDedupe(c); err != nil {
				return err
			}
			continue
		case "join":
			if err := parseJoin(c); err != nil {
				return err
			}
			continue
		}
		c.aggregate = true
	}
	c.opts.Aggregate = c.aggregate
	if c.opts.Dedupe != nil && (c.opts.Windows != nil || c.aggregate) {
		return errors.New("-check dedupe judges a dedupe, -check aggregate and windows a count: give one")
	}
	if c.aggregate && (c.tables.URL != "" || c.opts.AtLeastOnce || !c.opts.OneToOne) {
		return errors.New("-check aggregate needs a run into Kafka, exactly once and one to one (a stateful chain refuses the postgres sink and at_least_once, and the aggregate emits one count per input)")
	}
	return nil
}
