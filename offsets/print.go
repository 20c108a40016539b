package offsets

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// WriteTable writes ps as an aligned table, or with asJSON as a JSON
// array of Partition.
func WriteTable(w io.Writer, group string, ps []Partition, asJSON bool) error {
	if asJSON {
		return writeJSON(w, map[string]any{"group": group, "partitions": nonNil(ps)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "group %s\nTOPIC\tPARTITION\tCOMMITTED\tLOG START\tLOG END\tLAG\tSTORED IN\n", group)
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\n", p.Topic, p.Partition, offset(p.Committed), p.Start, p.End, p.Lag, orDash(p.StoredIn))
	}
	return tw.Flush()
}

// WritePlan writes a reset's changes: what would change (a dry run) or
// what changed (applied), as a table or with asJSON as JSON.
func WritePlan(w io.Writer, group string, target Target, cs []Change, applied, asJSON bool) error {
	if asJSON {
		return writeJSON(w, map[string]any{"group": group, "to": target.String(), "applied": applied, "changes": nonNil(cs)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "group %s, reset to %s\nTOPIC\tPARTITION\tCOMMITTED\tNEW\tLOG START\tLOG END\tNOTE\n", group, target)
	moves := 0
	for _, c := range cs {
		note := ""
		switch {
		case !c.Moves():
			note = "unchanged"
		case c.Clamped:
			note = "clamped to the log"
		}
		if c.Moves() {
			moves++
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\n", c.Topic, c.Partition.Partition, offset(c.Committed), c.To, c.Start, c.End, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case applied:
		_, err := fmt.Fprintf(w, "reset %d partition(s)\n", moves)
		return err
	case moves > 0:
		_, err := fmt.Fprintf(w, "dry run: nothing changed; add -execute to move %d partition(s)\n", moves)
		return err
	}
	_, err := fmt.Fprintln(w, "nothing to change")
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// nonNil makes a nil slice encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func offset(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
