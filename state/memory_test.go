package state

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// The restore measured by TestRestoreMemory: 1.5 million dedupe ids of
// about 25 bytes on the wire (a 14-byte JSON string key, an 8-byte
// expiry), in 4 partitions, written by transactions of 100,000 records as
// the processor writes them, restored into an empty directory under the
// GOMEMLIMIT the manifests set, by a process of its own whose peak
// resident memory is the kernel's count.
const (
	memRecords    = 1_500_000
	memPartitions = 4
	memTxn        = 100_000
	memGoLimit    = "256MiB"
	memLimitBytes = 512 << 20 // the manifests' memory limit
	memChildVar   = "STATE_TEST_RESTORE_CHILD"
)

// restoreFigures is what the restoring process reports.
type restoreFigures struct {
	Records     int64   `json:"records"`
	Keys        int64   `json:"keys"`
	Seconds     float64 `json:"seconds"`
	PeakRSS     int64   `json:"peak_rss_bytes"` // VmHWM
	PeakGoTotal int64   `json:"peak_go_bytes"`  // the Go runtime's total, sampled every 5 ms
	PeakHeap    int64   `json:"peak_heap_bytes"`
	CPUSeconds  float64 `json:"cpu_seconds"` // the process's, user and system
}

// TestRestoreMemory restores a 1.5 M-entry store under GOMEMLIMIT=256MiB in
// a process of its own and checks that its peak resident memory stays
// within the manifests' 512Mi limit, with room to spare; it reports the
// peak and the rate (records/s), which it does not assert: the rate
// depends on the machine's load. Run with -v to see the figures; built
// with CGO_ENABLED=0, as the image is, Pebble's cache and memtables are in
// the Go heap and count towards GOMEMLIMIT.
func TestRestoreMemory(t *testing.T) {
	if os.Getenv(memChildVar) != "" {
		restoreChild(t)
		return
	}
	if testing.Short() || raceEnabled {
		t.Skip("writes 1.5 million records and measures memory (-short, or the race detector, which multiplies it)")
	}
	kafkatest.ForEach(t, []kfake.Opt{kfake.NumBrokers(1)}, func(t *testing.T, c *kafkatest.Cluster) {
		group := kafkatest.Unique("restore-memory")
		topic := ChangelogTopic(group, "dedupe")
		c.CreateTopics(t, memPartitions, map[string]string{"cleanup.policy": "compact"}, topic)
		writeIDs(t, c, topic)
		cmd := exec.Command(os.Args[0], "-test.run=^TestRestoreMemory$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+memGoLimit,
			memChildVar+"="+strings.Join([]string{strings.Join(c.Brokers, ","), group, filepath.Join(t.TempDir(), "state")}, " "))
		outb, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the restoring process: %v\n%s", err, outb)
		}
		var f restoreFigures
		for _, l := range strings.Split(string(outb), "\n") {
			if js, ok := strings.CutPrefix(l, "restore-figures: "); ok {
				if err := json.Unmarshal([]byte(js), &f); err != nil {
					t.Fatal(err)
				}
			}
		}
		if f.Records != memRecords || f.Keys != memRecords {
			t.Fatalf("restored %d records to %d keys, want %d of each:\n%s", f.Records, f.Keys, memRecords, outb)
		}
		t.Logf("%s: %d records restored in %.2f s (%.0f records/s; %.2f s of CPU, %.0f records per CPU second) under GOMEMLIMIT=%s: peak RSS %d MiB, Go total %d MiB, heap %d MiB",
			c.Name, f.Records, f.Seconds, float64(f.Records)/f.Seconds, f.CPUSeconds, float64(f.Records)/f.CPUSeconds,
			memGoLimit, f.PeakRSS>>20, f.PeakGoTotal>>20, f.PeakHeap>>20)
		// A fifth of the limit to spare: the figure moves with the GC's
		// timing, not by that much.
		if f.PeakRSS > memLimitBytes*4/5 {
			t.Errorf("peak RSS %d MiB, want at most %d MiB (4/5 of the %d MiB limit)", f.PeakRSS>>20, memLimitBytes*4/5>>20, memLimitBytes>>20)
		}
	})
}

// writeIDs writes the changelog: memRecords distinct ids spread over the
// partitions, in transactions of memTxn records.
func writeIDs(t *testing.T, c *kafkatest.Cluster, topic string) {
	cl := c.Client(t, kgo.TransactionalID(kafkatest.Unique("restore-memory")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exp := encodeValue(time.Now().Add(24*time.Hour).UnixNano(), nil)
	for base := 0; base < memRecords; base += memTxn {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := make([]*kgo.Record, 0, memTxn)
		for i := base; i < base+memTxn; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % memPartitions),
				Key: []byte(strconv.Quote(fmt.Sprintf("id-%09d", i))), Value: exp})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
}

// restoreChild is the restoring process: it restores every partition and
// prints its figures.
func restoreChild(t *testing.T) {
	args := strings.Fields(os.Getenv(memChildVar))
	var peakGo, peakHeap atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the runtime's own accounting, at its peak
		defer close(sampled)
		s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			rtmetrics.Read(s)
			peakGo.Store(max(peakGo.Load(), int64(s[0].Value.Uint64())))
			peakHeap.Store(max(peakHeap.Load(), int64(s[1].Value.Uint64())))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	m, err := Open(Options{Dir: args[2], Group: args[1], Stores: []string{"dedupe"},
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(strings.Split(args[0], ",")...)}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	parts := make([]int32, memPartitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	if err := m.Restore(ctx, parts); err != nil {
		t.Fatal(err)
	}
	f := restoreFigures{Seconds: time.Since(began).Seconds()}
	close(done)
	<-sampled
	for _, s := range m.Status() {
		f.Records += s.RestoredRecords
		f.Keys += s.Keys
	}
	f.PeakRSS, f.PeakGoTotal, f.PeakHeap = vmHWM(t), peakGo.Load(), peakHeap.Load()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		f.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	js, _ := json.Marshal(f)
	fmt.Printf("restore-figures: %s\n", js)
}

// vmHWM is the process's peak resident memory, as the kernel counts it.
func vmHWM(t *testing.T) int64 {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}
