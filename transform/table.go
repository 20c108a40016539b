package transform

// Table is a table topic (compacted, keyed by the table's key) as this
// instance has read it: the latest row per key by offset, kept current
// while the stream runs (docs/joins.md). The processor keeps it and hands
// it to the transforms that read it (Joiner).
type Table interface {
	// Lookup returns the row of key: of the table partition of the
	// input record's partition when the table is co-partitioned, of the
	// whole table when global; ok is false when the key has no row. The
	// value must not be modified.
	Lookup(partition int32, key []byte) (value []byte, ok bool, err error)
	// Miss counts a record that found no row
	// (processor_join_misses_total{table}).
	Miss()
}

// Joiner is an optional interface of a transform that reads a table
// topic (the join built-in): the processor keeps the table, restored
// before any record of the input partitions assigned runs, and binds it
// to the transform before the first record.
type Joiner interface {
	// JoinTable names the table topic, and whether every instance keeps
	// all of it (global) rather than the partitions of the input it is
	// assigned (co-partitioned).
	JoinTable() (topic string, global bool)
	// BindTable hands the transform its table.
	BindTable(Table)
}

// JoinStage is a stage of a chain that reads a table (Joiner).
type JoinStage struct {
	Entry Entry
	// Index is the stage's place in the chain, as Chain.Hop counts.
	Index  int
	Joiner Joiner
}

// Joins returns the stages implementing Joiner, in chain order.
func (c *Chain) Joins() []JoinStage {
	var js []JoinStage
	for i, s := range c.stages {
		if j, ok := s.t.(Joiner); ok {
			js = append(js, JoinStage{Entry: s.entry, Index: i, Joiner: j})
		}
	}
	return js
}
