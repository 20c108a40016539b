package pipeline

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// lanePool returns a pool of workers workers under key ordering for a
// chain that runs up to lanes records of a partition at once.
func lanePool(t *testing.T, workers, lanes int) *pool {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("bounded", transform.Plain("", func() (transform.Transform, error) {
		return concurrentFunc{orderedFunc(passThrough), lanes}, nil
	}))
	c, err := reg.Build([]transform.Entry{{Name: "bounded"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	more := make([]*transform.Chain, workers-1)
	for i := range more {
		more[i] = c // deal runs no chain
	}
	pl := newPool(c, more, OrderKey)
	if pl.lanes != lanes {
		t.Fatalf("pool lanes %d, want %d", pl.lanes, lanes)
	}
	return &pl
}

// dealt is where one record of a poll went.
type dealt struct {
	worker int
	rec    *kgo.Record
	b      *batch
}

// dealing returns, per record of the poll pl last split (by its index in
// pool.results), where it went, and fails t unless each worker's records
// are in the poll's order and each record went to one worker.
func dealing(t *testing.T, pl *pool, n int) []dealt {
	t.Helper()
	got := make([]dealt, n)
	seen := 0
	for wi := range pl.workers {
		w := &pl.workers[wi]
		last := -1
		for _, tk := range w.tasks {
			b := &pl.batches[tk.b]
			for _, j := range w.idx[tk.from:tk.to] {
				i := b.at + int(j)
				if i <= last {
					t.Fatalf("worker %d runs record %d after %d, want the poll's order", wi, i, last)
				}
				if got[i].rec != nil {
					t.Fatalf("record %d went to workers %d and %d", i, got[i].worker, wi)
				}
				last, seen = i, seen+1
				got[i] = dealt{worker: wi, rec: b.recs[j], b: b}
			}
		}
	}
	if seen != n {
		t.Fatalf("%d of the poll's %d records were dealt", seen, n)
	}
	return got
}

// group names a record's key of its partition ("" key: null).
func group(d dealt) string {
	if d.rec.Key == nil {
		return fmt.Sprintf("%s/%d null", *d.b.topic, d.b.partition)
	}
	return fmt.Sprintf("%s/%d k=%s", *d.b.topic, d.b.partition, d.rec.Key)
}

// randomPoll returns a poll of up to 3 partitions of 2 topics, a
// partition sometimes in two fetches, each of up to 400 records of a few
// heavy keys, many light ones, and null keys.
func randomPoll(rng *rand.Rand) (kgo.Fetches, int) {
	var fs kgo.Fetches
	total := 0
	parts := 1 + rng.IntN(3)
	keys, heavy, nulls := 1+rng.IntN(300), rng.IntN(4), rng.IntN(4)
	for p := range parts {
		fetches := 1 + rng.IntN(2)
		off := int64(0)
		for range fetches {
			recs := make([]*kgo.Record, rng.IntN(400/fetches))
			for i := range recs {
				r := &kgo.Record{Offset: off}
				off++
				switch x := rng.IntN(10); {
				case x < nulls:
				case x < nulls+heavy:
					r.Key = []byte("heavy" + strconv.Itoa(rng.IntN(2)))
				default:
					r.Key = []byte(strconv.Itoa(rng.IntN(keys)))
				}
				recs[i] = r
			}
			total += len(recs)
			topic := "in" + strconv.Itoa(p%2)
			fs = append(fs, kgo.Fetch{Topics: []kgo.FetchTopic{{Topic: topic,
				Partitions: []kgo.FetchPartition{{Partition: int32(p), Records: recs}}}}})
		}
	}
	return fs, total
}

// Dealing by load, for a chain that bounds a partition's records at once:
// each key's records of a poll (the null key's: on the partition's home)
// go to one worker, in the poll's order; a partition's records to at most
// lanes workers from its home on; and, for one partition or lanes not
// below the workers, a worker that runs keys holds no more than
// (n + (span-1)·w)/span of the poll's n records, w its heaviest key's
// records, span the lanes a partition may use. The same poll dealt again
// goes to the same workers.
func TestDealByLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 1))
	for iter := range 300 {
		workers, lanes := 2+rng.IntN(11), 1+rng.IntN(20)
		pl := lanePool(t, workers, lanes)
		for poll := range 2 {
			fs, n := randomPoll(rng)
			name := fmt.Sprintf("case %d poll %d (%d workers, %d lanes, %d records)", iter, poll, workers, lanes, n)
			pl.split(fs)
			got := dealing(t, pl, n)
			checkLoadDealing(t, name, pl, got, workers, lanes, len(fs) == 1 || lanes >= workers)
			again := make([]int, n)
			for i, d := range got {
				again[i] = d.worker
			}
			pl.split(fs)
			for i, d := range dealing(t, pl, n) {
				if d.worker != again[i] {
					t.Fatalf("%s: record %d went to worker %d, then to %d", name, i, again[i], d.worker)
				}
			}
		}
	}
}

// checkLoadDealing checks one dealt poll (TestDealByLoad); bounded: the
// load bound applies.
func checkLoadDealing(t *testing.T, name string, pl *pool, got []dealt, workers, lanes int, bounded bool) {
	t.Helper()
	span := min(lanes, workers)
	on := map[string]int{}
	weight := map[string]int{}
	load := make([]int, workers)
	for _, d := range got {
		g := group(d)
		if w, ok := on[g]; ok && w != d.worker {
			t.Fatalf("%s: %s runs on workers %d and %d", name, g, w, d.worker)
		}
		on[g] = d.worker
		weight[g]++
		load[d.worker]++
		home := pl.home(d.b)
		if d.rec.Key == nil && d.worker != home {
			t.Fatalf("%s: a null-key record of %s/%d went to worker %d, not its home %d", name, *d.b.topic, d.b.partition, d.worker, home)
		}
		if lane := (d.worker - home + workers) % workers; lane >= span {
			t.Fatalf("%s: a record of %s/%d went to worker %d, lane %d from its home %d, want below %d", name, *d.b.topic, d.b.partition, d.worker, lane, home, span)
		}
	}
	if !bounded {
		return
	}
	heaviest := make([]int, workers)
	for g, w := range on {
		if g[len(g)-4:] != "null" {
			heaviest[w] = max(heaviest[w], weight[g])
		}
	}
	for w, l := range load {
		if heaviest[w] > 0 && span*l > len(got)+(span-1)*heaviest[w] {
			t.Fatalf("%s: worker %d holds %d records, its heaviest key %d: above (n + (span-1)·w)/span = (%d + %d·%d)/%d",
				name, w, l, heaviest[w], len(got), span-1, heaviest[w], span)
		}
	}
}

// The case the load dealing is for: 1,000 records of 1,000 keys over 8
// lanes go 125 to each, where the keys' hashes deal them unevenly.
func TestDealByLoadEven(t *testing.T) {
	pl := lanePool(t, 8, 8)
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i)), Offset: int64(i)}
	}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs}}}}}}
	if !pl.split(fs) {
		t.Fatal("1000 records of 1000 keys were not shared")
	}
	hashed := make([]int, 8)
	for wi := range pl.workers {
		if got := len(pl.workers[wi].idx); got != 125 {
			t.Errorf("worker %d holds %d records, want 125", wi, got)
		}
	}
	for _, r := range recs {
		hashed[pl.keyWorker(r, 0)]++
	}
	if slices.Max(hashed) <= 125 {
		t.Errorf("hashing the keys dealt %v, want some share above 125 (the test's premise)", hashed)
	}
}
