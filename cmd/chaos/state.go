package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The stateful mode: with aggregate in the chain the instances count by
// record key, each with its own state directory (-state-dir), and the
// report says what the restores read, from the processors' own
// "state restored" log lines.

// restores sums up the "state restored" lines of processor logs: the
// partitions restored, those rebuilt (no checkpoint: the whole changelog)
// and the changelog records read.
type restores struct {
	partitions, rebuilt int
	records             int64
}

// add counts the "state restored" lines of the JSON log r.
func (s *restores) add(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		// A store's restore, or a join table's (its rows read).
		if !strings.Contains(string(line), `"msg":"state restored"`) && !strings.Contains(string(line), `"msg":"table restored"`) {
			continue
		}
		var l struct {
			Records int64  `json:"records"`
			Rows    int64  `json:"rows"`
			From    *int64 `json:"from"`
			Rebuilt bool   `json:"rebuilt"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			continue // a line cut by a SIGKILL
		}
		s.partitions++
		s.records += l.Records + l.Rows
		// A table partition read from the topic's start with rows is
		// rebuilt too: it had no checkpoint (a new or wiped directory).
		if l.Rebuilt || l.From != nil && *l.From == 0 && l.Rows > 0 {
			s.rebuilt++
		}
	}
	return sc.Err()
}

// readRestores sums the restores in the log at path from offset from on.
func readRestores(path string, from int64) (restores, error) {
	var s restores
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.add(f); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// printState prints, in the stateful mode, the store, the state
// directories and what the restores read; a wipe whose restart rebuilt no
// partition is a failure of the drill (the fault did not bite), returned
// as unexpected.
func (d *driver) printState() (unexpected []string) {
	if !d.o.stateful() {
		return nil
	}
	store, what := "aggregate", "count by record key"
	switch d.o.counter() {
	case "wasm":
		store = "counts"
	case "join":
		fmt.Printf("%-10s join (its table's store), the table topic %s its changelog, state directories %s/instance-N\n", "state", d.joinTable, d.o.stateDir)
		store = ""
	case "dedupe":
		store, what = "dedupe", "dedupe by the unique seq: every input passes once"
		if d.o.duplicates() {
			what = "dedupe by seq: every seq passes once, its re-sends never, the late ones to the late topic"
		}
	}
	if d.o.grouped() {
		what = "count by " + groupField + fmt.Sprintf(" of orders keyed by order id, %d customers", d.o.customers)
	}
	if store != "" {
		fmt.Printf("%-10s %s (%s), changelog %s-%s-changelog, state directories %s/instance-N\n",
			"state", d.o.counter(), what, d.group, store, d.o.stateDir)
	}
	d.printRepartition()
	var all restores
	logs, _ := filepath.Glob(filepath.Join(d.o.logDir, "processor-*.log"))
	for _, l := range logs {
		s, err := readRestores(l, 0)
		if err != nil {
			unexpected = append(unexpected, fmt.Sprintf("reading the restores: %v", err))
			continue
		}
		all.partitions, all.rebuilt, all.records = all.partitions+s.partitions, all.rebuilt+s.rebuilt, all.records+s.records
	}
	fmt.Printf("%-10s %d partition restores, %d of them rebuilds (no checkpoint), %d changelog records read\n", "restores", all.partitions, all.rebuilt, all.records)
	d.mu.Lock()
	wiped := append([]wipedLog(nil), d.wiped...)
	d.mu.Unlock()
	for _, w := range wiped {
		s, err := readRestores(w.path, w.from)
		switch {
		case err != nil:
			unexpected = append(unexpected, fmt.Sprintf("reading the restores of processor %d after its wipe: %v", w.id, err))
		case s.rebuilt == 0:
			unexpected = append(unexpected, fmt.Sprintf("processor %d rebuilt no partition after its state directory was wiped (log %s)", w.id, w.path))
		default:
			fmt.Printf("%-10s processor %d rebuilt %d partitions from the changelog (%d records)\n", "wipe", w.id, s.rebuilt, s.records)
		}
	}
	return unexpected
}
