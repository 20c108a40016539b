package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report turns the runs into one Markdown table of medians, with the
// conditions it was measured under.
type report struct {
	o                      options
	env                    *environment
	broker                 string
	began                  time.Time
	loadBefore, loadAfter  string
	buildTime, preloadTime time.Duration
	total                  time.Duration
	inputs                 map[int]*input
	results                []*result
}

// row is the medians of one system on one input and commit interval.
type row struct {
	sys               system
	size              int
	interval          time.Duration
	ok, runs          int
	rate, lo, hi      float64 // records/s: median, min, max
	mbs, cpuM, rssMiB float64
	p50, p99, first   time.Duration
	ready             time.Duration // with -crash: median time to ready after a crash
	restored          int64         // with -crash: median changelog records restored after it; -1 when none logged
	na, failed        string
	warnings          []string
}

func (rp *report) rows() []*row {
	var rows []*row
	for _, size := range rp.o.sizes {
		for _, iv := range rp.o.intervals {
			for _, k := range rp.o.systems {
				s, _ := systemByKey(k)
				if !s.runsAt(rp.o, size, iv) {
					continue
				}
				in := rp.inputs[size].of(s.format)
				rw := &row{sys: s, size: size, interval: iv, na: rp.env.avail[k]}
				var rates, cpus, rss, p50s, p99s, firsts, readies, restored []float64
				for _, r := range rp.results {
					if r.spec.sys.key != k || r.spec.in.size != size || r.spec.interval != iv {
						continue
					}
					if r.unavailable != "" {
						continue
					}
					rw.runs++
					if r.err != "" {
						rw.failed = r.err
						continue
					}
					rw.ok++
					// The run's own input (ownInput) may hold another
					// count (system.records).
					rates = append(rates, float64(r.spec.in.records)/r.wall.Seconds())
					cpus = append(cpus, r.cpu/float64(r.spec.in.records)*1e6)
					rss = append(rss, float64(r.hwm)/(1<<20))
					p50s = append(p50s, float64(percentile(r.lat, 0.50)))
					p99s = append(p99s, float64(percentile(r.lat, 0.99)))
					firsts = append(firsts, float64(r.first))
					if r.ready > 0 {
						readies = append(readies, float64(r.ready))
						restored = append(restored, float64(r.restored))
					}
					for _, w := range r.warnings {
						rw.warnings = append(rw.warnings, fmt.Sprintf("round %d: %s", r.spec.round, w))
					}
				}
				if rw.ok > 0 {
					rw.rate, rw.lo, rw.hi = median(rates), slices.Min(rates), slices.Max(rates)
					rw.mbs = rw.rate * float64(in.bytes) / float64(in.records) / 1e6
					rw.cpuM, rw.rssMiB = median(cpus), median(rss)
					rw.p50, rw.p99 = time.Duration(median(p50s)), time.Duration(median(p99s))
					rw.first = time.Duration(median(firsts))
					if len(readies) > 0 {
						rw.ready, rw.restored = time.Duration(median(readies)), int64(median(restored))
					}
				}
				rows = append(rows, rw)
			}
		}
	}
	return rows
}

// markdown renders the results file: the conditions of the run, the
// table of medians with its notes, and what the columns mean.
func (rp *report) markdown() string {
	var b strings.Builder
	rp.writeConditions(&b)
	rp.writeTable(&b)
	rp.writeCrashTable(&b)
	b.WriteString("\nrecords/s: input records / wall time from the start of the process until the group's committed offsets reach the input's end offsets (startup and group join included). MB/s: the same for key and value bytes. First output: from the start of the process until the reader sees the first output record (startup, group join, first transaction). CPU: utime+stime of the process (children included) over that time, in 10 ms ticks. Peak RSS: VmHWM at the end of the drain. Ratios: records/s and CPU s / M records over the bare copier's and Kafka Streams' on the same input and commit interval.\n")
	return b.String()
}

// writeConditions writes the run's conditions: machine, broker, input,
// method, versions and durations.
func (rp *report) writeConditions(b *strings.Builder) {
	o := rp.o
	host, _ := os.Hostname()
	fmt.Fprintf(b, "<!-- Written by `make bench` (bench/run); quoted by docs/benchmarks.md. -->\n")
	fmt.Fprintf(b, "### `make bench` (%s), %s\n\n", o.mode, rp.began.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(b, "- Machine: %s, %d cores, %s; load average %s before, %s after.\n", host, runtime.NumCPU(), memTotal(), rp.loadBefore, rp.loadAfter)
	if o.note != "" {
		fmt.Fprintf(b, "- Note: %s\n", o.note)
	}
	fmt.Fprintf(b, "- Broker: %s.\n", rp.broker)
	fmt.Fprintf(b, "- Input: %d records per size (JSON order events keyed by customer, padded to the size; key and value bytes: ", o.records)
	var sz []string
	for _, s := range o.sizes {
		in := rp.inputs[s]
		sz = append(sz, fmt.Sprintf("%d B → %.1f MB", s, float64(in.bytes)/1e6))
	}
	fmt.Fprintf(b, "%s) in %d partitions, pre-loaded once; every run drains it from the start in a fresh group to its own output topic.\n", strings.Join(sz, ", "), o.partitions)
	var av []string
	for _, s := range o.sizes {
		if in := rp.inputs[s]; in.avro != nil {
			av = append(av, fmt.Sprintf("%d B → %.1f MB", s, float64(in.avro.bytes)/1e6))
		}
	}
	if len(av) > 0 {
		fmt.Fprintf(b, "- Avro rows: the same orders in the Schema Registry wire format (Avro, bench/run/avro.go's schema; key and value bytes: %s), in topics of their own; the schema registry is srserver, in bench/run's process; outputs in Avro with the output schema registered at start.\n", strings.Join(av, ", "))
	}
	if needsOnePartition(o) {
		fmt.Fprintf(b, "- The single-partition rows drain the same records pre-loaded into a topic of one partition, where only the workers' sharing of one partition's records helps.\n")
	}
	for _, k := range o.systems {
		if s, _ := systemByKey(k); s.records > 0 {
			fmt.Fprintf(b, "- %s drains an input of its own of %d records.\n", s.label, s.records)
		}
	}
	if needsStateful(o) {
		fmt.Fprintf(b, "- The stateful rows (%s) each drain a copy of the input pre-loaded for the run alone (a stateful chain takes one input topic, so their latency phase writes to that copy), with a fresh PROCESSOR_STATE_DIR in a temporary directory; the copy, the changelogs and the state directory are deleted after the run. Each emits one output per input (dedupe is by order id, which no two orders share) but window-close, which emits one final row per customer and 200 ms window once the window closes, stamped with its end: its outputs are not counted against the inputs, and its latency is from a window's end to its row on the output.\n", strings.Join(statefulKeys(o), ", "))
	}
	rp.writeStatefulPairs(b)
	rounds := plural(o.rounds, "round")
	fmt.Fprintf(b, "- %s; within a round the systems run one after another (%s) for each size and commit interval; the figures are medians of the rounds (records/s: median, and min-max in brackets).\n", rounds, strings.Join(o.systems, ", "))
	fmt.Fprintf(b, "- Latency: after each drain, %d records/s for %s into a second input topic (a stateful row: into its own input), each stamped when produced; the time until a read_committed reader sees it on the output.\n", o.liveRate, o.liveFor)
	fmt.Fprintf(b, "- Versions: %s; %s; Kafka Streams 4.4.0 (%s), JVM defaults.\n", orQ(rp.env.processorVersion), orQ(rp.env.goVersion), orQ(rp.env.javaVersion))
	if rp.env.baseline != "" {
		fmt.Fprintf(b, "- The rows named %q run the baseline build %s (%s).\n", baseSuffix, rp.env.baseline, orQ(versionOf(rp.env.baseline)))
	}
	if len(o.processorEx) > 0 {
		fmt.Fprintf(b, "- Extra processor settings: `%s`.\n", strings.Join(o.processorEx, "`, `"))
	}
	fmt.Fprintf(b, "- Took %s (builds %s, pre-load %s, runs %s).\n\n", rp.total.Round(time.Second),
		rp.buildTime.Round(time.Second), rp.preloadTime.Round(time.Second), (rp.total - rp.buildTime - rp.preloadTime).Round(time.Second))
}

// writeStatefulPairs writes how the stateful Kafka Streams rows run and
// what the join rows read, when they run.
func (rp *report) writeStatefulPairs(b *strings.Builder) {
	var ks []string
	for _, k := range rp.o.systems {
		if s, _ := systemByKey(k); s.topology != "" && s.topology != "identity" {
			ks = append(ks, k)
		}
	}
	if len(ks) > 0 {
		fmt.Fprintf(b, "- The stateful Kafka Streams rows (%s) run bench/kstreams' topologies (Topologies.java) on their own input copy as the processor's stateful rows do: exactly_once_v2, the same commit.interval.ms, RocksDB stores with changelogs (the defaults), statestore.cache.max.bytes=0 so that every input emits its update as the processor's do, num.stream.threads=%d (one per core, as the processor's workers), values parsed with Jackson; state.dir is a fresh temporary directory, deleted after the run. A row that groups by a field (count, sum by .customer; dedupe by .order_id) repartitions through a topic in both systems, and has drained only when its group has consumed that topic's records too.\n", strings.Join(ks, ", "), runtime.NumCPU())
	}
	if needsTable(rp.o) {
		fmt.Fprintf(b, "- The join rows read a customers table: %d rows (one per customer key of the orders), JSON, keyed by customer, pre-loaded once into a topic with the input's %d partitions, so that each order and its customer's row are in the same partition (co-partitioned: no repartition in either system).\n", customers+1, rp.o.partitions)
	}
}

// writeTable writes the table, one row per system, input and commit
// interval, and the notes its cells point to.
func (rp *report) writeTable(b *strings.Builder) {
	rows := rp.rows()
	fmt.Fprintf(b, "| record | commit | system | records/s | MB/s | first output s | CPU s / M records | peak RSS MiB | latency p50 ms | latency p99 ms | vs copier (rate, CPU) | vs Kafka Streams (rate, CPU) |\n")
	fmt.Fprintf(b, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var notes []string
	note := func(s string) string {
		for i, n := range notes {
			if n == s {
				return sup(i + 1)
			}
		}
		notes = append(notes, s)
		return sup(len(notes))
	}
	for _, rw := range rows {
		base := find(rows, rw.size, rw.interval, "copier")
		ks := find(rows, rw.size, rw.interval, rw.sys.versus())
		fmt.Fprintf(b, "| %s | %s | %s | ", sizeName(rw.size), rw.interval, rw.sys.label)
		switch {
		case rw.na != "":
			fmt.Fprintf(b, "not available%s | – | – | – | – | – | – | – | – |\n", note(rw.na))
			continue
		case rw.ok == 0 && rw.runs == 0:
			fmt.Fprintf(b, "not run | – | – | – | – | – | – | – | – |\n")
			continue
		case rw.ok == 0:
			fmt.Fprintf(b, "failed%s | – | – | – | – | – | – | – | – |\n", note(rw.failed))
			continue
		}
		rate := fmt.Sprintf("%s (%s–%s)", thousands(rw.rate), short(rw.lo), short(rw.hi))
		if rw.ok == 1 {
			rate = thousands(rw.rate)
		}
		if rw.ok < rw.runs {
			rate += note(fmt.Sprintf("%d of %d runs failed; the last failure: %s", rw.runs-rw.ok, rw.runs, rw.failed))
		}
		for _, w := range rw.warnings {
			rate += note(rw.sys.label + ", " + sizeName(rw.size) + ", commit " + rw.interval.String() + ", " + w)
		}
		fmt.Fprintf(b, "%s | %.1f | %.1f | %.1f | %.0f | %s | %s | %s | %s |\n", rate, rw.mbs, rw.first.Seconds(), rw.cpuM, rw.rssMiB,
			ms(rw.p50), ms(rw.p99), ratio(rw, base), ratio(rw, ks))
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for i, n := range notes {
			fmt.Fprintf(b, "%s %s\n", sup(i+1), n)
			if i < len(notes)-1 {
				b.WriteString("\n")
			}
		}
	}
}

// writeCrashTable writes, with -crash or restore rows, the time to ready
// after a crash of each row that measured it, beside its Kafka Streams
// pair's, and the changelog records its restart restored.
func (rp *report) writeCrashTable(b *strings.Builder) {
	rows := rp.rows()
	if !slices.ContainsFunc(rows, func(rw *row) bool { return rw.ready > 0 }) {
		return
	}
	fmt.Fprintf(b, "\nReady after a crash (-crash, -restore): the system is killed (SIGKILL) after the latency phase (a restore row: after %s of updates, while they still flow) and started again with the same group as a static member (the same group.instance.id), settings and state directory (a -wiped row: deleted first), a probe record written every %s; the time from the restart until the first probe is on the output, and the changelog records the restart's restores logged (medians of the rounds).\n\n", updatesFor, probeEvery)
	fmt.Fprintf(b, "| record | commit | system | ready after crash s | changelog records restored | vs Kafka Streams |\n|---|---|---|---:|---:|---:|\n")
	for _, rw := range rows {
		if rw.ready == 0 {
			continue
		}
		vs := "–"
		if ks := find(rows, rw.size, rw.interval, rw.sys.versus()); ks != nil && ks.ready > 0 {
			vs = fmt.Sprintf("%.2f×", rw.ready.Seconds()/ks.ready.Seconds())
		}
		restored := "–"
		if rw.restored >= 0 {
			restored = thousands(float64(rw.restored))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.2f | %s | %s |\n", sizeName(rw.size), rw.interval, rw.sys.label, rw.ready.Seconds(), restored, vs)
	}
}

func find(rows []*row, size int, iv time.Duration, key string) *row {
	for _, r := range rows {
		if r.size == size && r.interval == iv && r.sys.key == key {
			return r
		}
	}
	return nil
}

func ratio(rw, base *row) string {
	if base == nil || base.ok == 0 || rw.ok == 0 {
		return "–"
	}
	if base == rw {
		return "1"
	}
	return fmt.Sprintf("%.2f×, %.2f×", rw.rate/base.rate, rw.cpuM/base.cpuM)
}

// percentile is the nearest-rank percentile of ds (0 if empty).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func sizeName(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	if f < 10 {
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.0f", f)
}

func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func short(f float64) string {
	switch {
	case f >= 1e6:
		return fmt.Sprintf("%.2fM", f/1e6)
	case f >= 1e4:
		return fmt.Sprintf("%.0fk", f/1e3)
	case f >= 1e3:
		return fmt.Sprintf("%.1fk", f/1e3)
	}
	return fmt.Sprintf("%.0f", f)
}

func sup(n int) string {
	const digits = "⁰¹²³⁴⁵⁶⁷⁸⁹"
	var out []rune
	for _, c := range strconv.Itoa(n) {
		out = append(out, []rune(digits)[c-'0'])
	}
	return string(out)
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func memTotal() string {
	n, err := procBytes("/proc/meminfo", "MemTotal")
	if err != nil {
		return "? memory"
	}
	return fmt.Sprintf("%.0f GiB memory", float64(n)/(1<<30))
}

// runJSON is one run in the raw results file (latest.json beside the table).
type runJSON struct {
	System        string   `json:"system"`
	RecordBytes   int      `json:"record_bytes"`
	Commit        string   `json:"commit_interval"`
	Round         int      `json:"round"`
	Records       int      `json:"records"`
	WallSeconds   float64  `json:"wall_seconds,omitempty"`
	FirstOutput   float64  `json:"first_output_seconds,omitempty"`
	ReadyAfter    float64  `json:"ready_after_crash_seconds,omitempty"`
	Restored      *int64   `json:"restored_records,omitempty"`
	RecordsPerSec float64  `json:"records_per_second,omitempty"`
	CPUSeconds    float64  `json:"cpu_seconds,omitempty"`
	PeakRSSBytes  int64    `json:"peak_rss_bytes,omitempty"`
	LatencyMs     latJSON  `json:"latency_ms"`
	Outputs       int64    `json:"outputs"`
	Expected      int64    `json:"expected_outputs"`
	Warnings      []string `json:"warnings,omitempty"`
	Error         string   `json:"error,omitempty"`
	Unavailable   string   `json:"unavailable,omitempty"`
}

type latJSON struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

func (rp *report) json() ([]byte, error) {
	msf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var runs []runJSON
	for _, r := range rp.results {
		j := runJSON{System: r.spec.sys.key, RecordBytes: r.spec.in.size, Commit: r.spec.interval.String(), Round: r.spec.round,
			Records: r.spec.in.records, Outputs: r.outputs, Expected: r.expected, Warnings: r.warnings, Error: r.err, Unavailable: r.unavailable}
		if r.err == "" && r.unavailable == "" {
			j.WallSeconds, j.FirstOutput, j.ReadyAfter = r.wall.Seconds(), r.first.Seconds(), r.ready.Seconds()
			if r.ready > 0 {
				j.Restored = &r.restored
			}
			j.RecordsPerSec = float64(r.spec.in.records) / r.wall.Seconds()
			j.CPUSeconds, j.PeakRSSBytes = r.cpu, r.hwm
			j.LatencyMs = latJSON{Samples: len(r.lat), P50: msf(percentile(r.lat, 0.5)), P90: msf(percentile(r.lat, 0.9)),
				P99: msf(percentile(r.lat, 0.99)), Max: msf(percentile(r.lat, 1))}
		}
		runs = append(runs, j)
	}
	return json.MarshalIndent(map[string]any{"mode": rp.o.mode, "broker": rp.broker, "began": rp.began, "runs": runs}, "", "  ")
}

// writeSamples writes every latency sample, in the order seen, as CSV:
// milliseconds since the first live record's timestamp, and the latency
// in milliseconds.
func (rd *reader) writeSamples(path string) error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	var b strings.Builder
	b.WriteString("stamped_ms,latency_ms\n")
	from := rd.liveFrom.Load()
	for i, d := range rd.lat {
		fmt.Fprintf(&b, "%d,%.3f\n", rd.stamps[i]-from, float64(d.Microseconds())/1000)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
