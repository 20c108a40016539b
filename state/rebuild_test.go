package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// changelogOf is a random changelog of n records over about keys keys:
// overwrites, tombstones (of keys held and of keys never written) and
// expiries set, kept, changed and removed.
func changelogOf(rng *rand.Rand, n, keys int) []write {
	ws := make([]write, n)
	for i := range ws {
		k := []byte(fmt.Sprintf("k%05d", rng.IntN(keys)))
		if rng.IntN(5) == 0 {
			ws[i] = write{key: k}
			continue
		}
		exp := int64(0)
		if rng.IntN(2) == 0 {
			exp = int64(1+rng.IntN(3)) * 1_000
		}
		ws[i] = write{key: k, enc: encodeValue(exp, []byte(fmt.Sprint(rng.IntN(100_000))))}
	}
	return ws
}

// rebuildInto applies log to p in batches that end at the offsets of cuts
// (and at the end), as a restore from p's wiped state does, with seen as
// the rebuild's filter while the batch starts before switch, and without
// one (the lookups of a restore resumed after an interruption) after.
func rebuildInto(t *testing.T, l *local, p part, log []write, cuts []int, seen *keyFilter, switchAt int) partState {
	t.Helper()
	if err := l.wipe(p); err != nil {
		t.Fatal(err)
	}
	var st partState
	from := 0
	for _, end := range append(cuts, len(log)) {
		if end <= from {
			continue
		}
		batch := make([]write, end-from)
		copy(batch, log[from:end]) // apply fills in the lookups' answers
		pw := partWrites{p: p, writes: batch, cp: checkpoint{next: int64(end)}, before: st}
		if from < switchAt {
			pw.seen = seen
		}
		sts, err := l.apply([]partWrites{pw}, false)
		if err != nil {
			t.Fatal(err)
		}
		st, from = sts[0], end
	}
	return st
}

// contents is everything the database holds of p, data, expiry index,
// checkpoint and counts, by raw key.
func contents(t *testing.T, l *local, p part) map[string]string {
	t.Helper()
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: p.prefix(), UpperBound: append(p.prefix(), 0xff)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// randomCuts returns sorted batch ends in 1..n-1, about n/size of them.
func randomCuts(rng *rand.Rand, n, size int) []int {
	var cuts []int
	for at := rng.IntN(size) + 1; at < n; at += rng.IntN(2*size) + 1 {
		cuts = append(cuts, at)
	}
	return cuts
}

// TestRebuildFilterDifferential holds a rebuild from empty that skips the
// lookups of keys its filter never had to the lookup path: over random
// changelogs with overwrites, tombstones and expiries, in any batching,
// with filters small enough to answer wrongly "maybe" often and large
// enough to skip nearly every new key, and with the rebuild interrupted
// and resumed by the lookup path at any batch, the data, the expiry index,
// the checkpoint and the counts are byte for byte the lookup path's.
func TestRebuildFilterDifferential(t *testing.T) {
	l, err := openLocal(filepath.Join(t.TempDir(), "state"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	rng := rand.New(rand.NewPCG(7, 11))
	ref, got := part{"ref", 0}, part{"got", 0}
	skipped := int64(0)
	for round := range 40 {
		n, keys := 200+rng.IntN(3000), 50+rng.IntN(4000)
		log := changelogOf(rng, n, keys)
		refSt := rebuildInto(t, l, ref, log, randomCuts(rng, n, 1+rng.IntN(500)), nil, 0)
		want := contents(t, l, ref)
		bitsMax := uint64(filterMinBits)
		if round%2 == 1 {
			bitsMax = filterMaxBits
		}
		seen := newKeyFilter(int64(n), bitsMax)
		switchAt := n
		if round%3 == 0 {
			switchAt = rng.IntN(n)
		}
		gotSt := rebuildInto(t, l, got, log, randomCuts(rng, n, 1+rng.IntN(500)), seen, switchAt)
		skipped += seen.skipped
		if gotSt.keys != refSt.keys || gotSt.bytes != refSt.bytes {
			t.Fatalf("round %d: counts %d keys %d bytes, the lookup path's %d and %d", round, gotSt.keys, gotSt.bytes, refSt.keys, refSt.bytes)
		}
		have := map[string]string{}
		refPre, gotPre := string(ref.prefix()), len(got.prefix())
		for k, v := range contents(t, l, got) {
			have[refPre+k[gotPre:]] = v // the same entries under ref's prefix
		}
		if !maps.Equal(have, want) {
			t.Fatalf("round %d (%d records, %d keys, switched at %d): %d entries, the lookup path's %d, or their values differ",
				round, n, keys, switchAt, len(have), len(want))
		}
	}
	if skipped == 0 {
		t.Fatal("no lookup was skipped: the filter was never used")
	}
}

// TestKeyFilterBudget checks the filters' sizes: a rebuilt partition's
// grows with its records up to its share of the budget, a kept one has
// none.
func TestKeyFilterBudget(t *testing.T) {
	plan := map[part]*restoring{}
	for i := range 8 {
		plan[part{"t", int32(i)}] = &restoring{from: 0, end: 1 << 30, rebuilt: i < 6}
	}
	plan[part{"small", 0}] = &restoring{from: 10, end: 20, rebuilt: true}
	filterRebuilds(plan)
	total := 0
	for p, r := range plan {
		switch {
		case !r.rebuilt && r.seen != nil:
			t.Fatalf("%v: a partition kept has a filter", p)
		case r.rebuilt && r.seen == nil:
			t.Fatalf("%v: a partition rebuilt has no filter", p)
		case r.seen != nil:
			total += 8 * len(r.seen.words)
		}
	}
	if small := len(plan[part{"small", 0}].seen.words) * 64; small != filterMinBits {
		t.Fatalf("a filter of 10 records has %d bits, want %d", small, filterMinBits)
	}
	if total > filterBudgetBits/8 {
		t.Fatalf("filters of %d bytes, over the budget of %d", total, filterBudgetBits/8)
	}
	if big := len(plan[part{"t", 0}].seen.words) * 64; big < filterBudgetBits/16 {
		t.Fatalf("a filter of a large changelog has %d bits, under half its share", big)
	}
}

// TestKeyFilterFalsePositives checks the filter's sizing where it counts:
// a changelog's worth of new keys leaves at most about 1% of other keys
// answered "maybe" (each costs a lookup), and none of the keys added is
// ever answered "never".
func TestKeyFilterFalsePositives(t *testing.T) {
	const records = 168_000 // a partition of the benchmark's 1,009,800-record changelog
	f := newKeyFilter(records, filterMaxBits)
	for i := range records {
		f.add(f.hash(keyOf(i)))
	}
	for i := range records {
		if !f.has(f.hash(keyOf(i))) {
			t.Fatalf("key %d added, answered never added", i)
		}
	}
	maybe := 0
	for i := records; i < 2*records; i++ {
		if f.has(f.hash(keyOf(i))) {
			maybe++
		}
	}
	if rate := float64(maybe) / records; rate > 0.012 {
		t.Fatalf("%.2f%% of keys never added answered maybe, want at most 1.2%%", 100*rate)
	}
}

// TestRestoreRebuildMatchesLookups holds a whole Restore into an empty
// directory (the filter skipping lookups) to the lookup path applied in
// another batching: a changelog of 3 partitions
// with overwrites, tombstones and expiries, in compressed batches small
// and large, read from kfake over TCP and written in batches of a few
// records to more than a response's, leaves every partition's data,
// expiry index and counts byte for byte as the reference's.
func TestRestoreRebuildMatchesLookups(t *testing.T) {
	const parts = 3
	c := kafkatest.NewFake(t, kfake.NumBrokers(1))
	topic := ChangelogTopic("g", "s")
	c.CreateTopics(t, parts, map[string]string{"cleanup.policy": "compact"}, topic)
	rng := rand.New(rand.NewPCG(3, 5))
	logs := make([][]write, parts)
	var first, second []*kgo.Record
	for p := range int32(parts) {
		logs[p] = changelogOf(rng, 3000, 900)
		for i, w := range logs[p] {
			rec := &kgo.Record{Topic: topic, Partition: p, Key: w.key, Value: w.enc}
			if i < len(logs[p])/2 {
				first = append(first, rec)
			} else {
				second = append(second, rec)
			}
		}
	}
	// Compressed, the first half in batches of a few dozen records, the
	// second in one a partition: a response holds many batches, and the
	// records of one batch, which share its decompressed bytes, fall into
	// several of the restore's batches.
	for _, half := range []struct {
		recs  []*kgo.Record
		batch int32
	}{{first, 1 << 10}, {second, 1 << 20}} {
		c.ProduceSync(t, half.recs, kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerBatchMaxBytes(half.batch))
	}
	for _, batch := range []int{7, 250, 20000} {
		m, err := Open(Options{Dir: filepath.Join(t.TempDir(), "state"), Group: "g", Stores: []string{"s"},
			ClientOpts: c.ClientOpts(), RestoreBatch: batch})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Restore(ctx(t), []int32{0, 1, 2}); err != nil {
			t.Fatal(err)
		}
		ref, err := openLocal(filepath.Join(t.TempDir(), "ref"), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for p := range int32(parts) {
			pt := part{topic, p}
			refSt := rebuildInto(t, ref, pt, logs[p], randomCuts(rng, len(logs[p]), 100), nil, 0)
			got, want := contents(t, m.db, pt), contents(t, ref, pt)
			cp := string(append(pt.prefix(), kindCheckpoint))
			delete(got, cp) // the reference's offsets are made up
			delete(want, cp)
			if !maps.Equal(got, want) {
				t.Fatalf("batches of %d, partition %d: %d entries, the lookup path's %d, or their values differ", batch, p, len(got), len(want))
			}
			st := m.Status()[p]
			if st.Keys != refSt.keys || st.Bytes != refSt.bytes || st.RestoredRecords != int64(len(logs[p])) {
				t.Fatalf("batches of %d, partition %d: status %+v, the lookup path's %d keys %d bytes", batch, p, st, refSt.keys, refSt.bytes)
			}
		}
		_ = ref.close()
		_ = m.Close()
	}
}
