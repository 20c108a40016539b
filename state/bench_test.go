package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// localManager is a Manager whose partition 0 of store "s" is ready
// without Kafka, for benchmarks of the buffer and the local store.
func localManager(b *testing.B) *Manager {
	m, err := Open(Options{Dir: filepath.Join(b.TempDir(), "state"), Group: "g", Stores: []string{"s"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	m.mu.Lock()
	m.info(part{ChangelogTopic("g", "s"), 0}).ready = true
	m.mu.Unlock()
	return m
}

func keyOf(i int) []byte { return binary.BigEndian.AppendUint64([]byte("key-"), uint64(i)) }

// BenchmarkPut is a Put of a 16-byte value into the transaction buffer.
func BenchmarkPut(b *testing.B) {
	m := localManager(b)
	tx, _ := m.Begin()
	s, _ := tx.Store("s", 0)
	val := make([]byte, 16)
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = keyOf(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = s.Put(keys[i&(len(keys)-1)], val, time.Time{})
	}
}

// BenchmarkPutJournaled is BenchmarkPut as a record's write in the
// processor: through a worker's Journal, kept by a Mark.
func BenchmarkPutJournaled(b *testing.B) {
	m := localManager(b)
	tx, _ := m.Begin()
	j := &Journal{MaxRecordBytes: func(string) int { return 1 << 20 }}
	s, _ := j.Store(tx, "s", 0)
	val := make([]byte, 16)
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = keyOf(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = s.Put(keys[i&(len(keys)-1)], val, time.Time{})
		j.Mark()
	}
}

// BenchmarkGet is a Get the transaction buffer answers (the key read or
// written earlier in the transaction).
func BenchmarkGet(b *testing.B) {
	m := localManager(b)
	tx, _ := m.Begin()
	s, _ := tx.Store("s", 0)
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = keyOf(i)
		_ = s.Put(keys[i], make([]byte, 16), time.Time{})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok, _ := s.Get(keys[i&(len(keys)-1)]); !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkGetParallel is BenchmarkGet from every core at once, on
// different keys.
func BenchmarkGetParallel(b *testing.B) {
	m := localManager(b)
	tx, _ := m.Begin()
	s, _ := tx.Store("s", 0)
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = keyOf(i)
		_ = s.Put(keys[i], make([]byte, 16), time.Time{})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			_, _, _ = s.Get(keys[i&(len(keys)-1)])
		}
	})
}

// BenchmarkGetLocal is a Get of a committed key not yet in the buffer: a
// read of the local store.
func BenchmarkGetLocal(b *testing.B) {
	m := localManager(b)
	const n = 100_000
	commitLocal(b, m, 0, n)
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = keyOf(i)
	}
	tx, _ := m.Begin()
	s, _ := tx.Store("s", 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%n == 0 { // a fresh buffer, so that every Get reads the store
			tx.Abort()
			tx, _ = m.Begin()
			s, _ = tx.Store("s", 0)
		}
		if _, ok, _ := s.Get(keys[i%n]); !ok {
			b.Fatal("missing")
		}
	}
	tx.Abort()
}

// commitLocal commits n writes in one transaction, their changelog offsets
// made up from base (no Kafka).
func commitLocal(b *testing.B, m *Manager, base, n int) {
	tx, _ := m.Begin()
	s, _ := tx.Store("s", 0)
	val := make([]byte, 16)
	for i := range n {
		_ = s.Put(keyOf(i), val, time.Time{})
	}
	for i, r := range tx.Records() {
		r.Offset = int64(base + i)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCommit10k is the Commit of a transaction of 10,000 writes of
// 16-byte values to keys already stored: Records, then the local batch.
func BenchmarkCommit10k(b *testing.B) {
	m := localManager(b)
	const n = 10_000
	commitLocal(b, m, 0, n)
	b.ReportAllocs()
	for i := 1; b.Loop(); i++ {
		commitLocal(b, m, i*(n+1), n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/write")
}

// BenchmarkRestore500k restores 500,000 changelog records (100,000 keys, a
// 16-byte value each) of one partition from a kfake cluster over TCP into
// an empty directory.
func BenchmarkRestore500k(b *testing.B) {
	const records, keys = 500_000, 100_000
	c := kafkatest.NewFake(b, kfake.NumBrokers(1))
	topic := ChangelogTopic("g", "s")
	c.CreateTopics(b, 1, map[string]string{"cleanup.policy": "compact"}, topic)
	recs := make([]*kgo.Record, records)
	val := encodeValue(0, make([]byte, 16))
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: keyOf(i % keys), Value: val}
	}
	c.ProduceSync(b, recs, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		m, err := Open(Options{Dir: filepath.Join(b.TempDir(), fmt.Sprint(i)), Group: "g", Stores: []string{"s"},
			ClientOpts: c.ClientOpts()})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Restore(context.Background(), []int32{0}); err != nil {
			b.Fatal(err)
		}
		if st := m.Status()[0]; st.RestoredRecords != records || st.Keys != keys {
			b.Fatalf("restored %+v", st)
		}
		_ = m.Close()
	}
	b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkRestoreWiped1M is the full rebuild of the benchmarks'
// restore-wiped row, from a kfake cluster over TCP into an empty
// directory: an aggregate count's changelog of 1,009,800 records over 6
// partitions, 1,000,000 distinct customer keys with an 8-byte count each,
// then 9,800 updates of keys written before.
func BenchmarkRestoreWiped1M(b *testing.B) {
	const keys, updates, parts = 1_000_000, 9_800, 6
	c := kafkatest.NewFake(b, kfake.NumBrokers(1))
	topic := ChangelogTopic("g", "s")
	c.CreateTopics(b, parts, map[string]string{"cleanup.policy": "compact"}, topic)
	recs := make([]*kgo.Record, 0, keys+updates)
	count := func(n uint64) []byte { return encodeValue(0, binary.BigEndian.AppendUint64(nil, n)) }
	customer := func(i int) []byte { return []byte(fmt.Sprintf("%q", fmt.Sprintf("customer-%d", i))) }
	for i := range keys {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % parts), Key: customer(i), Value: count(1)})
	}
	for i := range updates {
		k := (i * 7919) % keys
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(k % parts), Key: customer(k), Value: count(2)})
	}
	c.ProduceSync(b, recs, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	all := make([]int32, parts)
	for i := range all {
		all[i] = int32(i)
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		m, err := Open(Options{Dir: filepath.Join(b.TempDir(), fmt.Sprint(i)), Group: "g", Stores: []string{"s"},
			ClientOpts: c.ClientOpts()})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Restore(context.Background(), all); err != nil {
			b.Fatal(err)
		}
		var read, stored int64
		for _, st := range m.Status() {
			read, stored = read+st.RestoredRecords, stored+st.Keys
		}
		if read != keys+updates || stored != keys {
			b.Fatalf("restored %d records to %d keys", read, stored)
		}
		_ = m.Close()
	}
	b.ReportMetric(float64(b.N*(keys+updates))/b.Elapsed().Seconds(), "records/s")
	// The process's CPU time (the broker's, in process, included) tells
	// runs on a loaded machine apart better than the time does.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCommitNewIDs10k is the loop's side of a transaction of a
// dedupe whose every id is new: 10,000 keys read (each a miss) and
// written with an expiry on the workers' side, untimed, then Records and
// Commit (the changelog records and the local batch of a data and an
// expiry-index entry per key), timed.
func BenchmarkCommitNewIDs10k(b *testing.B) {
	m := localManager(b)
	const n = 10_000
	val := make([]byte, 8)
	exp := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	next := 0
	for b.Loop() {
		b.StopTimer()
		tx, _ := m.Begin()
		s, _ := tx.Store("s", 0)
		for i := range n {
			k := keyOf(next + i)
			if _, ok, _ := s.Get(k); ok {
				b.Fatal("not new")
			}
			_ = s.Put(k, val, exp)
		}
		b.StartTimer()
		for i, r := range tx.Records() {
			r.Offset = int64(next + i)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		next += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/write")
}

// BenchmarkGetLocalMiss is a Get of a key the store has never had (a new
// id of a dedupe) in a store of 200,000 committed keys, flushed to its
// tables: a read of the local store that finds nothing.
func BenchmarkGetLocalMiss(b *testing.B) {
	m := localManager(b)
	const n, batches = 10_000, 20
	for i := range batches {
		tx, _ := m.Begin()
		s, _ := tx.Store("s", 0)
		for k := range n {
			_ = s.Put(keyOf(i*n+k), make([]byte, 8), time.Time{})
		}
		for j, r := range tx.Records() {
			r.Offset = int64(i*n + j)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if err := m.db.db.Flush(); err != nil {
		b.Fatal(err)
	}
	missing := make([][]byte, 1<<16)
	for i := range missing {
		missing[i] = keyOf(n*batches + 7 + 2*i)
	}
	tx, _ := m.Begin()
	s, _ := tx.Store("s", 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%len(missing) == 0 { // a fresh buffer, so that every Get reads the store
			tx.Abort()
			tx, _ = m.Begin()
			s, _ = tx.Store("s", 0)
		}
		if _, ok, _ := s.Get(missing[i%len(missing)]); ok {
			b.Fatal("found")
		}
	}
	tx.Abort()
}
