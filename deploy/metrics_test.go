package deploy

import (
	"go/ast"
	"go/token"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/txn"
)

// exported is one metric family the processor exports.
type exported struct {
	typ    string   // counter, gauge or histogram
	labels []string // variable labels, sorted
	where  string   // what registers it
}

// recorder is a prometheus.Registerer that keeps the collectors registered
// with it, and registers them with a real registry too.
type recorder struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.reg.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// descRE reads Desc.String(): fqName and the variable labels.
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), .*variableLabels: \{([^{}]*)\}\}$`)

// describe returns the fully-qualified name and the variable labels of
// each metric a collector describes.
func describe(t *testing.T, c prometheus.Collector) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		name, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatal(err)
		}
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				labels = append(labels, l)
			}
		}
		sort.Strings(labels)
		out[name] = labels
	}
	return out
}

// registeredMetrics returns the metrics that txn.NewMetrics,
// pipeline.NewMetrics and pgsink.NewMetrics register: names and labels from their collectors'
// descriptions, types from gathering them, one child made per vector.
func registeredMetrics(t *testing.T) map[string]exported {
	t.Helper()
	out := map[string]exported{}
	for _, pkg := range []struct {
		name     string
		register func(prometheus.Registerer)
	}{
		{"txn.NewMetrics", func(r prometheus.Registerer) { txn.NewMetrics(r) }},
		{"pipeline.NewMetrics", func(r prometheus.Registerer) { pipeline.NewMetrics(r) }},
		{"pgsink.NewMetrics", func(r prometheus.Registerer) { pgsink.NewMetrics(r) }},
		{"state.Open", func(r prometheus.Registerer) {
			m, err := state.Open(state.Options{Dir: t.TempDir(), Group: "g", Stores: []string{"s"}, Registerer: r})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
		}},
		{"state.NewTableMetrics", func(r prometheus.Registerer) {
			tb, err := state.OpenTable(state.TableOptions{Dir: t.TempDir(), Topic: "t"})
			if err != nil {
				t.Fatal(err)
			}
			_ = tb.Close()
			m, err := state.NewTableMetrics(r)
			if err != nil {
				t.Fatal(err)
			}
			m.Add(tb)
		}},
	} {
		rec := &recorder{reg: prometheus.NewRegistry()}
		pkg.register(rec)
		if len(rec.collectors) == 0 {
			t.Fatalf("%s registered nothing", pkg.name)
		}
		for _, c := range rec.collectors {
			for name, labels := range describe(t, c) {
				out[name] = exported{labels: labels, where: pkg.name}
				values := make([]string, len(labels))
				for i := range values {
					values[i] = "x"
				}
				switch v := c.(type) { // a vector without children gathers nothing
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
		families, err := rec.reg.Gather()
		if err != nil {
			t.Fatalf("%s: gathering: %v", pkg.name, err)
		}
		for _, f := range families {
			m, ok := out[f.GetName()]
			if !ok {
				t.Errorf("%s: %s is gathered but not described", pkg.name, f.GetName())
				continue
			}
			m.typ = strings.ToLower(f.GetType().String()) // COUNTER, GAUGE, HISTOGRAM
			out[f.GetName()] = m
		}
	}
	return out
}

// appMetrics returns the metrics cmd/processor/app defines itself (the
// build info): every prometheus.XxxOpts literal with a literal Namespace
// and Name, and the labels of the vector it makes. (Its registering
// functions are unexported; TestImageBinary scrapes the running binary.)
func appMetrics(t *testing.T) map[string]exported {
	t.Helper()
	out := map[string]exported{}
	fset := token.NewFileSet()
	inspectApp(t, fset, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		lit, ok := call.Args[0].(*ast.CompositeLit)
		if !ok {
			return true
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
			return true
		}
		typ := strings.ToLower(strings.TrimSuffix(sel.Sel.Name, "Opts"))
		fields := map[string]string{}
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key, _ := kv.Key.(*ast.Ident)
			if val, ok := kv.Value.(*ast.BasicLit); ok && key != nil && val.Kind == token.STRING {
				fields[key.Name], _ = strconv.Unquote(val.Value)
			}
		}
		if fields["Name"] == "" {
			return true
		}
		var name []string
		for _, part := range []string{fields["Namespace"], fields["Subsystem"], fields["Name"]} {
			if part != "" {
				name = append(name, part)
			}
		}
		var labels []string
		if len(call.Args) > 1 {
			if ls, ok := call.Args[1].(*ast.CompositeLit); ok {
				for _, el := range ls.Elts {
					if s, ok := el.(*ast.BasicLit); ok {
						l, _ := strconv.Unquote(s.Value)
						labels = append(labels, l)
					}
				}
			}
		}
		sort.Strings(labels)
		out[strings.Join(name, "_")] = exported{typ: typ, labels: labels, where: fset.Position(call.Pos()).String()}
		return true
	})
	return out
}

// documentedLabels parses the labels column of the metric table in
// docs/operations.md: metric name to its labels, sorted.
func documentedLabels(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	tick := regexp.MustCompile("`([a-z_]+)`")
	for _, line := range metricsSection(t) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 5 {
			continue
		}
		var labels []string
		for _, m := range tick.FindAllStringSubmatch(cells[3], -1) {
			labels = append(labels, m[1])
		}
		sort.Strings(labels)
		for _, name := range metricRE.FindAllString(cells[1], -1) {
			out[name] = labels
		}
	}
	return out
}

// TestRegisteredMetricsAreDocumented compares the metric table of
// docs/operations.md with the metrics the code registers: names, types and
// labels, both ways. franz-go's processor_kafka_* family is documented as
// one row and left out.
func TestRegisteredMetricsAreDocumented(t *testing.T) {
	reg := registeredMetrics(t)
	app := appMetrics(t)
	if _, ok := app["processor_build_info"]; !ok {
		t.Errorf("%s defines no processor_build_info (found %v)", appDir, app)
	}
	all := map[string]exported{}
	for name, m := range reg {
		all[name] = m
	}
	for name, m := range app {
		if prev, dup := all[name]; dup {
			t.Errorf("%s is defined in %s and registered by %s", name, m.where, prev.where)
		}
		all[name] = m
	}

	docTypes := documentedMetrics(t)
	docLabels := documentedLabels(t)
	var names []string
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := all[name]
		if strings.HasPrefix(name, kafkaPrefix) {
			continue
		}
		typ, ok := docTypes[name]
		if !ok {
			t.Errorf("%s (%s, %s) is exported but not in the metric table of %s", name, m.typ, m.where, operationsFile)
			continue
		}
		if typ != m.typ {
			t.Errorf("%s: %s says %s, %s registers a %s", name, operationsFile, typ, m.where, m.typ)
		}
		if !slices.Equal(docLabels[name], m.labels) {
			t.Errorf("%s: %s lists labels %v, %s registers %v", name, operationsFile, docLabels[name], m.where, m.labels)
		}
	}
	for name := range docTypes {
		if _, ok := all[name]; !ok && !strings.HasPrefix(name, kafkaPrefix) {
			t.Errorf("%s is in the metric table of %s, but nothing registers it (txn.NewMetrics, pipeline.NewMetrics, pgsink.NewMetrics, %s)", name, operationsFile, appDir)
		}
	}
}
