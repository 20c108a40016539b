package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// damage is one way a local store's directory gets damaged on disk.
type damage struct {
	name string
	do   func(t *testing.T, dir string)
}

// eachFile applies fn to every file of dir whose name matches.
func eachFile(t *testing.T, dir string, match func(string) bool, fn func(path string, size int64) error) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !match(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(filepath.Join(dir, e.Name()), info.Size()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no file to damage in %s", dir)
	}
}

func sst(name string) bool { return strings.HasSuffix(name, ".sst") }

func manifest(name string) bool { return strings.HasPrefix(name, "MANIFEST-") }

var damages = []damage{
	{"cut-sst", func(t *testing.T, dir string) {
		eachFile(t, dir, sst, func(p string, size int64) error { return os.Truncate(p, size/2) })
	}},
	{"missing-sst", func(t *testing.T, dir string) {
		eachFile(t, dir, sst, func(p string, _ int64) error { return os.Remove(p) })
	}},
	{"empty-manifest", func(t *testing.T, dir string) {
		eachFile(t, dir, manifest, func(p string, _ int64) error { return os.Truncate(p, 0) })
	}},
	{"corrupt-manifest", func(t *testing.T, dir string) {
		eachFile(t, dir, manifest, func(p string, size int64) error {
			return os.WriteFile(p, []byte(strings.Repeat("garbage!", int(size/8)+1)), 0o644)
		})
	}},
	{"garbage-options", func(t *testing.T, dir string) {
		eachFile(t, dir, func(n string) bool { return strings.HasPrefix(n, "OPTIONS-") }, func(p string, _ int64) error {
			return os.WriteFile(p, []byte("\x00garbage\xff"), 0o644)
		})
	}},
	// A table of the right size whose blocks fail their checksums: Pebble
	// opens it, and the first read of it fails as corrupt.
	{"corrupt-sst", func(t *testing.T, dir string) {
		eachFile(t, dir, sst, func(p string, _ int64) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for i := 0; i < len(b)-64; i += 13 {
				b[i] ^= 0x5a
			}
			return os.WriteFile(p, b, 0o644)
		})
	}},
	// A store of the key layout before the version key (layout.go): keys
	// and no version. Opened by this build, it is wiped and rebuilt,
	// counted with the reason "layout".
	{"layout-1", func(t *testing.T, dir string) {
		db, err := pebble.Open(dir, &pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Delete(layoutKey, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}},
	// Files that are none of Pebble's: left alone, and the store with them.
	{"garbage-files", func(t *testing.T, dir string) {
		for _, n := range []string{"junk.txt", "999999.tmp", "notes"} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}},
}

// TestDamagedStoreRebuilt damages a real store on disk in each way and
// opens it again: the store is rebuilt from the changelog (logged,
// counted in processor_state_rebuilds_total{reason="damaged"}), it holds
// what the changelog holds, tail included, and a count goes on from there.
func TestDamagedStoreRebuilt(t *testing.T) {
	if os.Getenv(damagedChildVar) != "" {
		readDamaged(t)
		return
	}
	kafkatest.ForEach(t, []kfake.Opt{kfake.NumBrokers(1)}, func(t *testing.T, c *kafkatest.Cluster) {
		for _, d := range damages {
			t.Run(d.name, func(t *testing.T) { damagedStore(t, c, d) })
		}
	})
}

// damagedChildVar names the variable that makes TestDamagedStoreRebuilt
// the process reading a corrupt store: brokers, group and directory.
const damagedChildVar = "STATE_TEST_DAMAGED_CHILD"

// readDamaged opens the store, restores it and reads every key of it;
// on corruption it fails, or Pebble's logger exits the process.
func readDamaged(t *testing.T) {
	args := strings.Fields(os.Getenv(damagedChildVar))
	m, err := Open(Options{Dir: args[2], Group: args[1], Stores: []string{"s"},
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(strings.Split(args[0], ",")...)}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, cancel := context.WithTimeout(context.Background(), restoreBound)
	defer cancel()
	if err := m.Restore(c, []int32{0, 1}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		tx, _ := m.Begin()
		for i := range 2000 {
			if _, _, err := store(t, tx, "s", p).Get([]byte(fmt.Sprintf("k-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		tx.Abort()
	}
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func damagedStore(t *testing.T, c *kafkatest.Cluster, d damage) {
	r := newRig(t, c, 2, nil)
	m := r.open()
	for round := range 3 {
		for p := range r.parts {
			kv := keys("k", 2000, string(rune('a'+round)))
			kv["n"] = string(rune('1' + round))
			r.commit(m, p, kv)
		}
		if err := m.db.db.Flush(); err != nil { // tables on disk, not only the log
			t.Fatal(err)
		}
	}
	r.behind(0, map[string]string{"n": "4"}, true) // committed in Kafka, never locally: the tail
	_ = m.Close()
	d.do(t, r.dir)

	if d.name == "corrupt-sst" {
		// Open cannot tell; the first read of a table can (the restore's,
		// or Pebble's own in the background, which exits the process):
		// a process of its own reads, and must leave the directory
		// marked for the next start.
		cmd := exec.Command(os.Args[0], "-test.run=^TestDamagedStoreRebuilt$", "-test.count=1")
		cmd.Env = append(os.Environ(), damagedChildVar+"="+strings.Join([]string{strings.Join(c.Brokers, ","), r.group, r.dir}, " "))
		out, err := cmd.CombinedOutput()
		t.Logf("the process that read the corrupt tables: %v; %s", err, firstLine(string(out)))
		if _, err := os.Stat(filepath.Join(r.dir, damageMarker)); err != nil {
			t.Fatalf("the directory is not marked damaged: %v\n%s", err, out)
		}
	}
	m = r.manager()
	c2, cancel := context.WithTimeout(context.Background(), restoreBound)
	defer cancel()
	if err := m.Restore(c2, r.all()); err != nil {
		t.Fatal(err)
	}
	rebuilt := 0.0
	if d.name != "garbage-files" {
		rebuilt = float64(r.parts)
	}
	reason := "damaged"
	if d.name == "layout-1" {
		reason = "layout"
	}
	if got := testutil.ToFloat64(m.met.rebuilds.WithLabelValues("s", reason)); got != rebuilt {
		t.Errorf("processor_state_rebuilds_total{reason=%s} = %v, want %v", reason, got, rebuilt)
	}
	for p := range r.parts {
		r.check(m, p, 0)
		if st := status(t, m, "s", p); st.Rebuilt != (rebuilt > 0) {
			t.Errorf("partition %d: rebuilt %v, want %v", p, st.Rebuilt, rebuilt > 0)
		}
	}
	want0 := r.want(0, 0)
	if want0["n"] != "4" {
		t.Fatalf("the changelog says n=%q, want 4", want0["n"])
	}
	r.commit(m, 0, map[string]string{"n": "5"}) // the count goes on
	want(t, m, "s", 0, "n", "5")
	if d.name == "garbage-files" {
		if _, err := os.Stat(filepath.Join(r.dir, "junk.txt")); err != nil {
			t.Errorf("a file not Pebble's was removed: %v", err)
		}
	}
}

// A directory that cannot be used for a reason a rebuild will not fix is
// a *DirError, and nothing in it is deleted: a file where the directory
// must be (as root, the one refusal of permissions the kernel makes).
func TestStateDirUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "state")} {
		_, err := Open(Options{Dir: dir, Group: "g", Stores: []string{"s"}})
		var de *DirError
		if !errors.As(err, &de) || !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("Open(%s): %v, want a DirError of ENOTDIR", dir, err)
		}
		t.Log(err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "mine" {
		t.Fatalf("the file is now %q (%v)", b, err)
	}
}
