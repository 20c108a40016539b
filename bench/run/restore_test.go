package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The restore rows are not in -systems' default; -restore adds them, once
// each, after the rows given; each is the count topology, compared with
// its Kafka Streams twin of the same variant (tail or wiped).
func TestRestoreRows(t *testing.T) {
	want := []string{"restore", "restore-wiped", "kstreams-restore", "kstreams-restore-wiped"}
	if got := restoreKeysOf(); !slices.Equal(got, want) {
		t.Fatalf("restore rows %v, want %v", got, want)
	}
	for _, k := range want {
		if slices.Contains(defaultSystems(), k) {
			t.Errorf("%s runs by default", k)
		}
	}
	if !slices.Contains(defaultSystems(), "aggregate-count") || len(defaultSystems()) != len(systems)-len(want) {
		t.Errorf("default systems %v", defaultSystems())
	}
	got := withRestore([]string{"copier", "kstreams-restore"})
	if !slices.Equal(got, []string{"copier", "kstreams-restore", "restore", "restore-wiped", "kstreams-restore-wiped"}) {
		t.Errorf("withRestore: %v", got)
	}
	for _, k := range want {
		s, ok := systemByKey(k)
		if !ok || !s.restore || s.keys != restoreKeys || s.records != restoreKeys || !s.ownInput || !slices.Equal(s.stores, []string{"aggregate"}) {
			t.Fatalf("%s: %+v", k, s)
		}
		if s.wipe != strings.HasSuffix(k, "-wiped") {
			t.Errorf("%s wipes: %v", k, s.wipe)
		}
		ks, ok := systemByKey(s.versus())
		if !ok || ks.topology != "count" || ks.wipe != s.wipe || !ks.restore {
			t.Errorf("%s is compared with %s: %+v", k, s.versus(), ks)
		}
		if isKStreams(k) != (s.topology == "count") {
			t.Errorf("%s: topology %q", k, s.topology)
		}
	}
}

// A restore row runs once a round, at the first size and commit interval;
// every other row at each of them.
func TestRunsAt(t *testing.T) {
	o := options{sizes: []int{100, 1024}, intervals: []time.Duration{100 * time.Millisecond, time.Second}}
	r, _ := systemByKey("restore")
	a, _ := systemByKey("aggregate-count")
	for _, size := range o.sizes {
		for _, iv := range o.intervals {
			first := size == 100 && iv == 100*time.Millisecond
			if r.runsAt(o, size, iv) != first {
				t.Errorf("restore at %d B, %s: %v", size, iv, !first)
			}
			if !a.runsAt(o, size, iv) {
				t.Errorf("aggregate-count does not run at %d B, %s", size, iv)
			}
		}
	}
}

// A restore run's own input holds restoreKeys records, one per customer
// key, so the store has restoreKeys keys after the drain, and its live
// updates go on through the same keys; it runs as a static member, as
// every run with a recovery phase does, and no other run does.
func TestRestoreSpec(t *testing.T) {
	o := options{sizes: []int{100}, intervals: []time.Duration{100 * time.Millisecond}, records: 1000}
	env := &environment{logs: t.TempDir(), cache: t.TempDir()}
	in := &input{topic: "in", size: 100, records: 1000}
	r, _ := systemByKey("kstreams-restore-wiped")
	spec, err := newSpec(o, env, r, in, "bench-1", 2, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(spec.stateDir)
	if spec.in.records != restoreKeys || spec.in.topic != spec.live || spec.member != spec.group+"-1" {
		t.Errorf("spec: %d records, input %s, live %s, member %q", spec.in.records, spec.in.topic, spec.live, spec.member)
	}
	keys := map[string]bool{}
	for _, n := range []int64{0, 1, 999_999, 1_000_000, 1_000_001} {
		keys[string(spec.in.record(n).Key)] = true
	}
	if len(keys) != 3 || !keys["customer-999999"] || !keys["customer-0"] {
		t.Errorf("keys %v: not %d distinct customers", keys, restoreKeys)
	}
	a, _ := systemByKey("aggregate-count")
	plain, err := newSpec(o, env, a, in, "bench-1", 2, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(plain.stateDir)
	if plain.member != "" || plain.in.records != 1000 || string(plain.in.record(1000).Key) != "customer-0" {
		t.Errorf("aggregate-count without -crash: member %q, %d records", plain.member, plain.in.records)
	}
	o.crash = true
	if crashed, _ := newSpec(o, env, a, in, "bench-1", 2, 100*time.Millisecond); crashed.member == "" {
		t.Error("a -crash run is not a static member")
	} else {
		os.RemoveAll(crashed.stateDir)
	}
	if drainTimeout(o, spec) <= time.Duration(restoreKeys)*time.Millisecond || drainTimeout(o, plain) != o.runTimeout {
		t.Errorf("drain timeouts %s, %s", drainTimeout(o, spec), drainTimeout(o, plain))
	}
}

// A static member ID reaches each system: the processor's
// PROCESSOR_INSTANCE_ID, Kafka Streams' -Dbench.instance.id (BenchCopy
// sets group.instance.id from it), the copier's -instance-id.
func TestStaticMember(t *testing.T) {
	e := &environment{processor: "/bin/processor", java: "/usr/bin/java", jar: "/k.jar", copier: "/bin/copier"}
	b := &broker{addrs: []string{"127.0.0.1:1"}}
	for key, want := range map[string]string{"restore": "PROCESSOR_INSTANCE_ID=g-1", "kstreams-restore": "-Dbench.instance.id=g-1", "copier": "-instance-id g-1"} {
		sys, _ := systemByKey(key)
		s := &runSpec{sys: sys, group: "g", in: &input{topic: "in"}, live: "in", out: "out", interval: 100 * time.Millisecond,
			stateDir: t.TempDir(), member: "g-1"}
		c, err := sys.cmd(e, b, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(c.Env, "\n") + "\n" + strings.Join(c.Args, " ")
		if !strings.Contains(all, want) {
			t.Errorf("%s: no %q in %v %v", key, want, c.Env, c.Args)
		}
		s.member = ""
		c, _ = sys.cmd(e, b, s, nil)
		if all := strings.Join(c.Env, "\n") + strings.Join(c.Args, " "); strings.Contains(all, "g-1") {
			t.Errorf("%s: a member ID without one: %v %v", key, c.Env, c.Args)
		}
	}
}

// The restored records are summed from both systems' logs: the
// processor's "state restored" JSON lines and Kafka Streams' BenchCopy
// lines; other lines, a line cut by the SIGKILL and lines that look alike
// do not count; no restore line at all is -1.
func TestRestoredRecords(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"INFO","msg":"state restored","topic":"g-aggregate-changelog","partition":0,"records":120,"from":5,"to":130,"rebuilt":false,"seconds":0.2}`,
		`{"level":"INFO","msg":"state rebuilding from the changelog's start","records":999}`,
		`{"level":"INFO","msg":"state restored","topic":"g-aggregate-changelog","partition":1,"records":7,"from":0,"to":8,"rebuilt":true}`,
		`BenchCopy: restoring aggregate partition 0 from 0 to 500`,
		`BenchCopy: restored 500 records of aggregate partition 0 in 812 ms`,
		`BenchCopy: state REBALANCING -> RUNNING`,
		`{"level":"INFO","msg":"state restored","topic":"g-aggr`,
	}, "\n")
	n, err := restoredRecords(strings.NewReader(log))
	if err != nil || n != 627 {
		t.Errorf("restored %d, %v; want 627", n, err)
	}
	n, err = restoredRecords(strings.NewReader("BenchCopy: state REBALANCING -> RUNNING\n{\"msg\":\"committed\",\"records\":3}\n"))
	if err != nil || n != -1 {
		t.Errorf("without restores: %d, %v", n, err)
	}
	n, _ = restoredRecords(strings.NewReader(`{"msg":"state restored","records":0}`))
	if n != 0 {
		t.Errorf("a restore of nothing: %d", n)
	}

	path := filepath.Join(t.TempDir(), "run.log")
	first := `{"msg":"state restored","records":1000000}` + "\n"
	if err := os.WriteFile(path, []byte(first+`{"msg":"state restored","records":42}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := restoredSince(path, int64(len(first))); err != nil || n != 42 {
		t.Errorf("since the restart: %d, %v; want 42", n, err)
	}
	if logSize(path) != int64(len(first))+int64(len(`{"msg":"state restored","records":42}`+"\n")) {
		t.Errorf("log size %d", logSize(path))
	}
}

// Wiping a state directory leaves it there and empty.
func TestWipeState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(dir, "aggregate", "0_1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "aggregate", "CURRENT"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := wipeState(dir); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("after the wipe: %v, %v", ents, err)
	}
	if wipeState("") == nil {
		t.Error("wiped no directory")
	}
}
