package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// joinConfig are the flags of -check join.
type joinConfig struct {
	check            check.Join
	table, into, by  string
	typ              string
	intoPath, byPath check.GroupPath
}

// joinFlags declares the flags of -check join.
func joinFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.join.table, "join-table", "", "with -check join: the join's table topic (PROCESSOR_JOIN_TABLE), read to its last stable offsets (required)")
	fs.StringVar(&c.join.into, "join-into", "", "with -check join: the join's INTO, the path of object members where each output holds its row, such as .customer (required)")
	fs.StringVar(&c.join.by, "join-by", "", "with -check join: the join's BY, a path of object members of the input values such as .customer_id (unset: the record key)")
	fs.StringVar(&c.join.typ, "join-type", "inner", "with -check join: the join's TYPE, inner or left")
}

// parseJoin sets up -check join.
func parseJoin(c *config) error {
	j := &c.join
	var err error
	if j.intoPath, err = check.ParseGroupPath(j.into); err != nil {
		return fmt.Errorf("-join-into %w", err)
	}
	if j.byPath, err = check.ParseGroupPath(j.by); err != nil {
		return fmt.Errorf("-join-by %w", err)
	}
	switch {
	case j.table == "" || len(j.intoPath) == 0:
		return errors.New("-check join needs -join-table and -join-into (the join's TABLE and INTO)")
	case j.typ != "inner" && j.typ != "left":
		return fmt.Errorf("-join-type %q: want inner or left", j.typ)
	case c.tables.URL != "" || c.opts.AtLeastOnce || c.opts.OneToOne && j.typ == "inner":
		return errors.New("-check join needs a run into Kafka, exactly once, and -one-to-one=false for an inner join (it filters inputs without a row)")
	}
	j.check.Left = j.typ == "left"
	c.opts.Join = &j.check
	return nil
}

// joinSource makes src read what -check join needs.
func joinSource(src *check.Source, c config) {
	if c.opts.Join == nil {
		return
	}
	src.Join, src.JoinTable, src.JoinInto, src.GroupBy = true, c.join.table, c.join.intoPath, c.join.byPath
}
