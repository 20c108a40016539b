// Package check is the model and the checker behind eoscheck: given the
// input records that exist, the output records with their lineage and
// transaction outcome, the consumer group's committed offsets and samples of
// partition ends over time, it counts the anomalies an exactly-once
// consume-transform-produce run must not show. The checker is pure (no Kafka
// I/O); reader.go and read.go fill the model from a cluster, postgres.go
// from the PostgreSQL sink's tables. It shares only record's vocabulary
// with the processor, so that the auditor links none of the processor's
// own code.
package check

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamproc/processor/record"
)

// Input is an input record that exists: a data record a read_committed
// reader of the input topic receives.
type Input struct {
	Topic     string
	Partition int32
	Offset    int64
}

// TP returns the input's partition.
func (in Input) TP() record.TopicPartition {
	return record.TopicPartition{Topic: in.Topic, Partition: in.Partition}
}

// String returns "topic/partition@offset".
func (in Input) String() string {
	return in.Topic + "/" + strconv.Itoa(int(in.Partition)) + "@" + strconv.FormatInt(in.Offset, 10)
}

// Output is a data record in an output topic. Exactly one of Committed,
// Aborted and Pending is normally true; a record that is none of them had a
// commit marker but a read_committed reader did not receive it, and a
// record that is both Committed and Aborted is an aborted-read anomaly.
type Output struct {
	Topic     string
	Partition int32
	Offset    int64

	// Source is the input record the output was made from, taken from its
	// lineage headers. Source.Topic is empty when the headers are missing
	// or malformed.
	Source Input
	// Key is the record's key; Keyed is false for a null key.
	Key   string
	Keyed bool

	// Committed: a read_committed reader received the record.
	Committed bool
	// Aborted: the record belongs to a transaction that ended with an
	// abort marker (learnt from a read_uncommitted read with control
	// records).
	Aborted bool
	// Pending: the record's transaction had no marker yet when read, or
	// the record lay beyond the last stable offset: it is not visible yet.
	Pending bool

	// Count is the aggregate count the output's value holds, CountOK
	// whether it holds one, and CountKey the value's "key" member as
	// written, nil when absent (ParseAggregate); read only with
	// Source.Aggregate.
	Count    int64
	CountOK  bool
	CountKey []byte
	// Row is the JSON at Source.JoinInto of the value, nil when absent;
	// read only with Source.Join.
	Row json.RawMessage
	// Timestamp is the record's timestamp, Unix milliseconds.
	Timestamp int64

	// TxnEnd is the offset, in the output's partition, of the control
	// record that ended its transaction; -1 when unknown (open, or not
	// transactional). Two visible outputs of one input in one partition
	// with different TxnEnd were committed by two transactions.
	TxnEnd int64
}

// TP returns the output's partition.
func (o Output) TP() record.TopicPartition {
	return record.TopicPartition{Topic: o.Topic, Partition: o.Partition}
}

// String returns "topic/partition@offset".
func (o Output) String() string {
	return Input{o.Topic, o.Partition, o.Offset}.String()
}

// DeadLetterRecord is a data record in a dead-letter topic: an input record the
// processor gave up on (PROCESSOR_ON_ERROR=dlq), written with the lineage
// headers of that input and the error that made it give up. The embedded
// Output holds its position, lineage (Source) and transaction outcome, read
// the same way as the outputs'.
type DeadLetterRecord struct {
	Output
	// Error is the record's processor.error header, cut to about
	// MaxErrorLen bytes; empty when the header is missing.
	Error string
}

// MaxErrorLen bounds the processor.error text kept per dead letter.
const MaxErrorLen = 200

// Sample is one observation of partition ends and group progress.
type Sample struct {
	At time.Time
	// Stable is the last stable offset (the read_committed end) of every
	// sampled partition, input and output.
	Stable map[record.TopicPartition]int64
	// High is the high watermark (the read_uncommitted end) of the same
	// partitions.
	High map[record.TopicPartition]int64
	// Committed is the group's committed offset of each input partition
	// that has one.
	Committed map[record.TopicPartition]int64
}

// Run is everything known about one processor run.
type Run struct {
	// Inputs are the input records that exist.
	Inputs []Input
	// Outputs are all data records of the output topics, visible or not.
	Outputs []Output
	// Committed is the group's committed offset (the next offset to read)
	// per input partition, read after the outputs' ends were taken. A
	// partition without a committed offset counts as committed at 0.
	Committed map[record.TopicPartition]int64
	// CommittedEarlier is the group's committed offsets read before the
	// outputs' ends were taken; nil means Committed. Against a live
	// processor the outputs are judged against the group progress that
	// brackets them: "lost" uses these, everything else Committed.
	CommittedEarlier map[record.TopicPartition]int64
	// InputEnds is the log-end offset (high watermark) of every input
	// partition, including empty ones.
	InputEnds map[record.TopicPartition]int64
	// Samples are observations over time, for hanging and stuck.
	Samples []Sample
	// DeadLetters are all data records of the dead-letter topics, visible
	// or not; empty when none were read. Every visible one is a
	// dead-letter anomaly, but for an input whose mark says it fails.
	DeadLetters []DeadLetterRecord
	// Replayed, when not nil, is the committed offset of `processor
	// replay`'s group on each dead-letter partition (Source.ReplayGroup):
	// a dead letter below it was run again, and accounts for nothing (its
	// input's outputs, if the replay had any, are judged like the others;
	// a dead letter of it that failed again is above).
	Replayed map[record.TopicPartition]int64
	// Marks are the fault drill's marks of the inputs that have one
	// (Source.Poison); nil or missing: Ordinary.
	Marks map[Input]Mark
	// InputKeys are the keys of the inputs that have one, for
	// Options.Aggregate (Source.Aggregate); with Source.GroupBy the group
	// keys of the inputs whose value has one (GroupPath.Key); nil
	// otherwise.
	InputKeys map[Input]string
	// InputTimes are the inputs' timestamps (Unix milliseconds), for
	// Options.Windows and Options.Dedupe (Source.Windows, Source.Dedupe);
	// nil otherwise.
	InputTimes map[Input]int64
	// Table is every committed record of a join's table topic
	// (Source.JoinTable), for Options.Join; nil otherwise.
	Table []TableRow
}

// Options say what a correct run looks like.
type Options struct {
	// OneToOne: every input produces exactly one output (identity-like
	// transforms). Enables the duplicate count per input and lost. When
	// false (filters, flat-maps), duplicate means one input's outputs in
	// one output partition committed by two transactions, and lost is
	// not checked.
	OneToOne bool
	// ExpectAll: the group must have committed every input; inputs at or
	// past the committed offset are counted as uncommitted.
	ExpectAll bool
	// TransactionTimeout: a partition whose last stable offset stays
	// below its high watermark, without moving, for longer than this is
	// hanging. 0 disables the check.
	TransactionTimeout time.Duration
	// StuckAfter: an input partition with lag whose committed offset does
	// not move for longer than this is stuck. 0 disables the check.
	StuckAfter time.Duration
	// MaxExamples is how many examples are kept per anomaly; 0 means 5.
	MaxExamples int
	// AtLeastOnce audits a processor running at_least_once: an input
	// written more than once is expected (a crash or an abort repeats a
	// batch) and counted in Report.Repeated, not as a duplicate; every
	// other anomaly, lost above all, still counts.
	AtLeastOnce bool
	// Skipping: some instances ran PROCESSOR_ON_ERROR=skip, so an input
	// whose mark says it fails (NotJSON) may have neither output nor dead
	// letter: it is counted as skipped by policy (ClassTotals.Skipped),
	// not lost. Ordinary and other marked inputs are lost all the same.
	Skipping bool
	// Aggregate: the processor ran the aggregate transform counting by
	// record key (see checkAggregate): every key's counts must run 1, 2,
	// 3, ... in the committed output up to its number of inputs taken.
	// Needs Output.Count and Run.InputKeys (Source.Aggregate).
	Aggregate bool
	// Windows: the processor ran a windowed count by record key with
	// EMIT=close (see checkWindows): exactly one final row per key and
	// window, each the count of its inputs that were not late, and every
	// late input in the late topic once. Needs Output.Count,
	// Run.InputKeys and Run.InputTimes (Source.Windows).
	Windows *Windows
	// Dedupe: the processor ran the dedupe transform by a member of the
	// value (see checkDedupe): every id's first sighting within its
	// window passes once, its duplicates never, and every late input is
	// in the late topic once. Needs Run.InputKeys to hold the inputs'
	// ids and Run.InputTimes (Source.Dedupe with Source.GroupBy).
	Dedupe *Dedupe
	// GroupBy, with Windows: the windowed count was grouped by this
	// member of the input values, behind a repartition hop, whose order
	// the input does not hold: the late topic is taken as the record of
	// the late inputs (hopwindows.go; tumbling windows only).
	// GroupBy, with Aggregate: the counts were grouped by this member of
	// the input values (the aggregate's BY), not by record key: every
	// group's counts must run 1, 2, 3, ... up to its inputs taken across
	// all input partitions, each output keyed by its input's group (see
	// group.go). Needs Run.InputKeys to hold the inputs' group keys
	// (Source.GroupBy). The order anomaly is then not judged: through a
	// repartition hop an input partition's records keep their order
	// within each group (key-order), not across groups.
	GroupBy GroupPath
	// Join: the processor ran the join transform (see checkJoin): every
	// row an output carries is a committed version of its input's key,
	// never older than an earlier input of the same partition and key
	// saw. Needs Run.InputKeys (the lookup keys), Output.Row and
	// Run.Table (Source.Join, Source.JoinTable, Source.JoinInto).
	Join *Join
}

// uniqueInputs returns inputs sorted, without repeats, and the set of
// them.
func uniqueInputs(inputs []Input) ([]Input, map[Input]bool) {
	inputs = slices.Clone(inputs)
	slices.SortFunc(inputs, cmpInput)
	inputs = slices.Compact(inputs)
	exists := make(map[Input]bool, len(inputs))
	for _, in := range inputs {
		exists[in] = true
	}
	return inputs, exists
}

// committedAt returns the committed offset of tp, 0 when there is none.
func committedAt(m map[record.TopicPartition]int64, tp record.TopicPartition) int64 {
	if c, ok := m[tp]; ok && c > 0 {
		return c
	}
	return 0
}

func cmpInput(a, b Input) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
}

func cmpTP(a, b record.TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func sortedKeys[V any](m map[record.TopicPartition]V) []record.TopicPartition {
	ks := make([]record.TopicPartition, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, cmpTP)
	return ks
}

// lineageHeaders names the lineage headers of both forms in examples.
var lineageHeaders = record.HeaderSource + " or " + strings.TrimSuffix(record.HeaderSourceTopic, "topic") + "*"

// TruncateError cuts a processor.error text to about MaxErrorLen bytes, at
// a UTF-8 boundary (record.Cut), marking the cut with "...".
func TruncateError(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	return record.Cut(s, MaxErrorLen) + "..."
}
