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

// TableRef is a table topic a transform reads, and how it is kept.
type TableRef struct {
	// Topic is the table topic.
	Topic string
	// Global: every instance keeps all of it, rather than the partitions
	// of the input it is assigned (co-partitioned).
	Global bool
	// TableSetting and ModeSetting are the transform's settings that name
	// the table and its mode (the join's TABLE and MODE), which the
	// processor's refusals name.
	TableSetting, ModeSetting string
}

// Joiner is an optional interface of a transform that reads table topics
// (the join built-in, a wasm module with TABLES): the processor keeps
// each table, restored before any record of the input partitions
// assigned runs, and binds it to the transform before the first record.
type Joiner interface {
	// JoinTables names the tables the transform reads, each once.
	JoinTables() []TableRef
	// BindTable hands the transform the table of topic.
	BindTable(topic string, t Table)
}

// JoinStage is a stage of a chain that reads tables (Joiner).
type JoinStage struct {
	Entry Entry
	// Index is the stage's place in the chain, as Chain.Hop counts.
	Index  int
	Joiner Joiner
}

// Joins returns the stages implementing Joiner that read a table, in
// chain order (a wasm stage without TABLES reads none).
func (c *Chain) Joins() []JoinStage {
	var js []JoinStage
	for i, s := range c.stages {
		if j, ok := s.t.(Joiner); ok && len(j.JoinTables()) > 0 {
			js = append(js, JoinStage{Entry: s.entry, Index: i, Joiner: j})
		}
	}
	return js
}
