package app

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/txn"
)

// The metrics reference: every metric family the processor exports
// besides the Go runtime and process collectors, read from the collectors
// themselves (name, type, labels, help). `processor metrics` prints it;
// the table in docs/operations.md is the same reference in Markdown
// (`make docs`), and a test fails when the file and the code drift apart.

// exporters are what registers the processor's metrics, in the order of
// the reference: each registers its collectors the way Main does (the
// transaction and record metrics with the pipeline, each registered
// sink's when it opens, the build info and readiness at start, franz-go's
// kprom metrics with each Kafka client).
var exporters = []func(rec *recorder){
	func(rec *recorder) { txn.NewMetrics(rec) },
	func(rec *recorder) { pipeline.NewMetrics(rec) },
	registerSinkMetrics,
	func(rec *recorder) { registerBuildInfo(rec) },
	func(rec *recorder) { registerReady(rec, func() string { return "starting" }) },
	registerStateMetrics,
	registerTableMetrics,
	registerKafkaMetrics,
}

// registerSinkMetrics registers the metrics of every sink in
// sink.Default that has some (Spec.Metrics), in name order, as each does
// when it opens.
func registerSinkMetrics(rec *recorder) {
	for _, name := range sink.Default.Names() {
		spec, _ := sink.Default.Lookup(name)
		if spec.Metrics == nil {
			continue
		}
		if err := spec.Metrics(collectorRegister(rec)); err != nil {
			panic(fmt.Sprintf("metrics reference: sink %s: %v", name, err))
		}
	}
}

// registerStateMetrics registers the state store's metrics, which a
// stateful chain's processor has, from a store opened in a directory of
// its own and closed again.
func registerStateMetrics(rec *recorder) {
	dir, err := os.MkdirTemp("", "processor-metrics-state")
	if err != nil {
		panic(fmt.Sprintf("metrics reference: a state directory: %v", err))
	}
	defer os.RemoveAll(dir)
	m, err := state.Open(state.Options{Dir: dir, Group: "reference", Stores: []string{"store"}, Registerer: rec})
	if err != nil {
		panic(fmt.Sprintf("metrics reference: a state store: %v", err))
	}
	frozen := rec.frozen
	rec.frozen = true // closing the store unregisters its metrics: keep them
	_ = m.Close()
	rec.frozen = frozen
}

// registerTableMetrics registers the join tables' metrics, which a
// chain with a join has, reporting a table opened in a directory of its
// own and closed again.
func registerTableMetrics(rec *recorder) {
	dir, err := os.MkdirTemp("", "processor-metrics-table")
	if err != nil {
		panic(fmt.Sprintf("metrics reference: a table directory: %v", err))
	}
	defer os.RemoveAll(dir)
	t, err := state.OpenTable(state.TableOptions{Dir: dir, Topic: "reference"})
	if err != nil {
		panic(fmt.Sprintf("metrics reference: a table: %v", err))
	}
	_ = t.Close()
	m, err := state.NewTableMetrics(rec)
	if err != nil {
		panic(fmt.Sprintf("metrics reference: the tables' metrics: %v", err))
	}
	m.Add(t)
}

// registerKafkaMetrics registers the kprom metrics of one Kafka client,
// as the client hook does when a client is created; the client never
// connects, and is closed before the metrics are read.
func registerKafkaMetrics(rec *recorder) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.WithHooks(newKafkaMetrics(rec)))
	if err != nil {
		panic(fmt.Sprintf("metrics reference: a Kafka client: %v", err))
	}
	rec.frozen = true // closing the client unregisters its metrics: keep them
	cl.Close()
}

// metricRow is one row of the metrics reference.
type metricRow struct {
	Name, Type, Help string
	Labels           []string // variable labels, in declared order
}

// recorder is a registry that keeps the collectors registered with it, in
// order.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
	frozen     bool // Unregister does nothing
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool {
	return !r.frozen && r.Registry.Unregister(c)
}

// descRE reads a Desc's String: its name, help and variable labels.
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), .*variableLabels: \{([^{}]*)\}\}$`)

// metricRows returns the reference: every family the exporters register,
// in their order and, within a collector, in the order it describes them.
func metricRows() []metricRow {
	rec := &recorder{Registry: prometheus.NewRegistry()}
	for _, register := range exporters {
		register(rec)
	}
	var rows []metricRow
	for _, c := range rec.collectors {
		rows = append(rows, describeCollector(c)...)
	}
	types := familyTypes(rec)
	for i := range rows {
		rows[i].Type = types[rows[i].Name]
	}
	return rows
}

// describeCollector returns the rows of the families c describes.
func describeCollector(c prometheus.Collector) []metricRow {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var rows []metricRow
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			panic("metrics reference: cannot read " + d.String())
		}
		name, err1 := strconv.Unquote(m[1])
		help, err2 := strconv.Unquote(m[2])
		if err1 != nil || err2 != nil {
			panic("metrics reference: cannot read " + d.String())
		}
		row := metricRow{Name: name, Help: help}
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(l), "c("), ")"); l != "" {
				row.Labels = append(row.Labels, l)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// familyTypes gathers rec, with one child made in every vector (an empty
// vector gathers nothing), and returns each family's type: counter,
// gauge, histogram or summary.
func familyTypes(rec *recorder) map[string]string {
	for _, c := range rec.collectors {
		for _, row := range describeCollector(c) {
			values := slices.Repeat([]string{"x"}, len(row.Labels))
			switch v := c.(type) {
			case *prometheus.CounterVec:
				v.WithLabelValues(values...)
			case *prometheus.GaugeVec:
				v.WithLabelValues(values...)
			case *prometheus.HistogramVec:
				v.WithLabelValues(values...)
			case *prometheus.SummaryVec:
				v.WithLabelValues(values...)
			}
		}
	}
	families, err := rec.Gather()
	if err != nil {
		panic(fmt.Sprintf("metrics reference: gathering: %v", err))
	}
	types := map[string]string{}
	for _, f := range families {
		types[f.GetName()] = strings.ToLower(f.GetType().String())
	}
	return types
}

// WriteMetrics writes the metrics reference: as the Markdown table of
// docs/operations.md, or as the plain text of `processor metrics`.
func WriteMetrics(w io.Writer, markdown bool) {
	rows := metricRows()
	if markdown {
		fmt.Fprintln(w, "| metric | type | labels | meaning |\n|---|---|---|---|")
		for _, r := range rows {
			labels := make([]string, len(r.Labels))
			for i, l := range r.Labels {
				labels[i] = "`" + l + "`"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", r.Name, r.Type, strings.Join(labels, ", "), cell(r.Help))
		}
		return
	}
	for _, r := range rows {
		name := r.Name
		if len(r.Labels) > 0 {
			name += "{" + strings.Join(r.Labels, ",") + "}"
		}
		fmt.Fprintf(w, "%s (%s)\n    %s\n", name, r.Type, r.Help)
	}
}
