// Package record is the vocabulary every part of the processor shares and
// the auditor reads: where a record came from (Source), which partition a
// piece of state belongs to (TopicPartition), the lineage and dead-letter
// header names with the encoding of the lineage headers (headers.go), the
// helpers that clip text to fit a header (clip.go), and how an output
// names a record key in JSON (key.go). It is a leaf: it
// imports nothing of the processor, so that cmd/eoscheck can read what the
// processor writes without linking the loop, the session, the plugin API
// or a database driver.
package record

import "strconv"

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is topic/partition, as logs and reports show it.
func (tp TopicPartition) String() string {
	return tp.Topic + "/" + strconv.FormatInt(int64(tp.Partition), 10)
}

// Source is the position of one input record: its topic, partition and
// offset. Every output and dead letter carries its input's Source.
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
}

// TopicPartition returns the partition the source record is in.
func (s Source) TopicPartition() TopicPartition {
	return TopicPartition{Topic: s.Topic, Partition: s.Partition}
}
