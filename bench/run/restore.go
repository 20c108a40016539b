package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The restore rows (-restore): a count by customer over restoreKeys
// distinct customers, so that the store holds restoreKeys keys, then
// updatesFor of live updates, SIGKILL while they still flow, a restart
// on the same group (static membership), and the time until the first
// new record is on the output. "restore" and "kstreams-restore" keep the
// state directory (the processor reads its changelog's tail past the
// local checkpoint; Kafka Streams under exactly_once_v2 restores what its
// unclean shutdown left); "-wiped" deletes it before the restart, so
// both rebuild the store from the changelog's start.
const (
	restoreKeys = 1_000_000
	updatesFor  = 10 * time.Second
)

// restoreRow is the restore row key: the processor's aggregate count by
// customer, or (a key starting with "kstreams-") Kafka Streams' count
// topology, the same work as the aggregate-count / kstreams-count pair.
func restoreRow(key string, wipe bool) system {
	how := "state kept (tail)"
	if wipe {
		how = "state directory wiped (full rebuild)"
	}
	what := fmt.Sprintf("count by customer, %s keys, restart after SIGKILL, %s", thousands(restoreKeys), how)
	s := system{key: key, stores: []string{"aggregate"}, ownInput: true, records: restoreKeys, keys: restoreKeys,
		restore: true, wipe: wipe, pair: "kstreams-" + strings.TrimPrefix(key, "kstreams-")}
	if strings.HasPrefix(key, "kstreams-") {
		s.label, s.topology, s.cmd = ksLabel(what), "count", kstreamsCmd
		return s
	}
	s.label = fmt.Sprintf("processor, aggregate %s, %d workers (stateful)", what, runtime.NumCPU())
	s.needs = []string{"PROCESSOR_WORKERS", "PROCESSOR_STATE_DIR", "PROCESSOR_AGGREGATE_FUNCTION", "PROCESSOR_AGGREGATE_BY", "PROCESSOR_INSTANCE_ID"}
	s.cmd = statefulCmd("aggregate", map[string]string{"PROCESSOR_AGGREGATE_FUNCTION": "count", "PROCESSOR_AGGREGATE_BY": ".customer"})
	return s
}

// restoreKeysOf are the keys of the restore rows, in the order of systems.
func restoreKeysOf() []string {
	var ks []string
	for _, s := range systems {
		if s.restore {
			ks = append(ks, s.key)
		}
	}
	return ks
}

// defaultSystems is -systems' default: every row but the restore rows,
// which -restore adds.
func defaultSystems() []string {
	var ks []string
	for _, s := range systems {
		if !s.restore {
			ks = append(ks, s.key)
		}
	}
	return ks
}

// withRestore is keys with the restore rows that it lacks appended.
func withRestore(keys []string) []string {
	out := slices.Clone(keys)
	for _, k := range restoreKeysOf() {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// runsAt reports whether s runs on the input of size with commit interval
// iv: every row does, but a restore row only at the first size and
// interval of the run (its input is its own, of restoreKeys records).
func (s system) runsAt(o options, size int, iv time.Duration) bool {
	return !s.restore || (size == o.sizes[0] && iv == o.intervals[0])
}

// wipeState deletes the state directory of a run (the processor's
// PROCESSOR_STATE_DIR, Kafka Streams' state.dir) and creates it empty.
func wipeState(dir string) error {
	if dir == "" {
		return fmt.Errorf("no state directory to wipe")
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("wiping the state directory: %w", err)
	}
	return os.MkdirAll(dir, 0o755)
}

// ksRestored is Kafka Streams' line (bench/kstreams BenchCopy.Restores) at
// the end of a store partition's restore.
var ksRestored = regexp.MustCompile(`^BenchCopy: restored (\d+) records of `)

// restoredRecords sums the changelog records that the restores logged in
// r restored: the processor's "state restored" lines (JSON, "records")
// and Kafka Streams' "BenchCopy: restored N records of ..." lines. It
// returns -1 when no restore was logged.
func restoredRecords(r io.Reader) (int64, error) {
	var sum int64 = -1
	add := func(n int64) {
		if sum < 0 {
			sum = 0
		}
		sum += n
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := ksRestored.FindStringSubmatch(line); m != nil {
			n, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				return -1, fmt.Errorf("%q: %w", line, err)
			}
			add(n)
			continue
		}
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"state restored"`) {
			continue
		}
		var l struct {
			Msg     string `json:"msg"`
			Records *int64 `json:"records"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Msg != "state restored" || l.Records == nil {
			continue
		}
		add(*l.Records)
	}
	return sum, sc.Err()
}

// restoredSince is restoredRecords of the log from offset on: the lines
// that the restarted system wrote.
func restoredSince(log string, offset int64) (int64, error) {
	f, err := os.Open(log)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return -1, err
	}
	return restoredRecords(f)
}

// logSize is the size of the log file, where the restart's lines begin.
func logSize(log string) int64 {
	fi, err := os.Stat(log)
	if err != nil {
		return 0
	}
	return fi.Size()
}
