package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Paths relative to this package's directory, where go test runs.
const (
	dashboardFile  = "grafana/processor.json"
	rulesFile      = "prometheus/alerts.yml"
	rulesTestFile  = "prometheus/alerts_test.yml"
	operationsFile = "../docs/operations.md"

	// The data source every panel and query variable must use: the
	// dashboard's own variable, so that it works imported or provisioned.
	datasourceUID = "${datasource}"
	// franz-go's kprom metrics: documented as one family.
	kafkaPrefix = "processor_kafka_"
)

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(readFile(t, dashboardFile)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels returns the dashboard's panels, those inside collapsed rows
// included, rows included.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// exprs returns the PromQL expressions of the dashboard's panels, each
// with where it is, for messages; withVariables adds the queries of its
// variables (Grafana's label_values, not PromQL).
func (d dashboard) exprs(withVariables bool) map[string]string {
	out := map[string]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			out[fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID)] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if withVariables && v.Type == "query" {
			out[fmt.Sprintf("variable %s", v.Name)] = v.Definition
		}
	}
	return out
}

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q, uid %q: want both set", d.Title, d.UID)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want that of a current Grafana (36 or later)", d.SchemaVersion)
	}

	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "datasource" && string(v.Query) != `"prometheus"` {
			t.Errorf("variable %s: query %s, want \"prometheus\"", v.Name, v.Query)
		}
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != datasourceUID) {
			t.Errorf("variable %s: its data source must be %s", v.Name, datasourceUID)
		}
	}
	for name, typ := range map[string]string{"datasource": "datasource", "job": "query", "namespace": "query", "group": "query", "instance": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s: type %q, want %q", name, vars[name], typ)
		}
	}

	panels := allPanels(d.Panels)
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	ids := map[int]string{}
	for _, p := range panels {
		name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.Title == "" {
			t.Errorf("%s (type %s) has no title", name, p.Type)
		}
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("%s: id not unique or zero (also %q)", name, prev)
		}
		ids[p.ID] = p.Title
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24-column grid", name, g)
		}
		if p.Type == "row" { // a row holds panels; it has no queries of its own
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != datasourceUID {
			t.Errorf("%s: datasource %+v, want prometheus %s", name, p.Datasource, datasourceUID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s has no targets", name)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s target %s has no expr", name, tg.RefID)
			}
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: target refId %q empty or repeated", name, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource != nil && tg.Datasource.UID != datasourceUID {
				t.Errorf("%s target %s: datasource %+v, want %s", name, tg.RefID, tg.Datasource, datasourceUID)
			}
			// Every query follows the job, pipeline and instance pickers.
			for _, sel := range []string{`job=~"$job"`, `namespace=~"$namespace"`, `group=~"$group"`, `instance=~"$instance"`} {
				if !strings.Contains(tg.Expr, sel) {
					t.Errorf("%s target %s does not select %s: %s", name, tg.RefID, sel, tg.Expr)
				}
			}
		}
	}
}

// metricRE finds metric names in PromQL, YAML and Markdown alike. It is
// case-sensitive: PROCESSOR_* environment variables and Processor* alert
// names do not match.
var metricRE = regexp.MustCompile(`\bprocessor_[a-z0-9_]*[a-z0-9]`)

// documentedMetrics parses the table under "## Metrics" in
// docs/operations.md: metric name (first column, in backquotes, labels in
// braces) to type (second column).
func documentedMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range metricsSection(t) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 4 {
			continue
		}
		name, typ := cells[1], strings.TrimSpace(cells[2])
		if strings.Contains(name, "`"+kafkaPrefix+"*`") {
			out[kafkaPrefix+"*"] = typ
			name = strings.ReplaceAll(name, "`"+kafkaPrefix+"*`", "")
		}
		for _, m := range metricRE.FindAllString(name, -1) {
			out[m] = typ
		}
	}
	if len(out) < 10 {
		t.Fatalf("%s: found only %d metrics in the table under \"## Metrics\": %v", operationsFile, len(out), out)
	}
	return out
}

// metricsSection returns the lines of the "## Metrics" section of
// docs/operations.md, up to the next "## " heading.
func metricsSection(t *testing.T) []string {
	t.Helper()
	doc := readFile(t, operationsFile)
	start := strings.Index(doc, "\n## Metrics\n")
	if start < 0 {
		t.Fatalf("%s: no \"## Metrics\" section", operationsFile)
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	return strings.Split(section, "\n")
}

// undocumented reports whether name is not in the documented table: a
// histogram may appear as _bucket, _sum and _count, and franz-go's kprom
// metrics are documented by name (the generated table) or as the
// processor_kafka_* family.
func undocumented(doc map[string]string, name string) bool {
	if _, ok := doc[name]; ok {
		return false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && doc[base] == "histogram" {
			return false
		}
	}
	if strings.HasPrefix(name, kafkaPrefix) {
		_, ok := doc[kafkaPrefix+"*"]
		return !ok
	}
	return true
}

func TestMetricsAreDocumented(t *testing.T) {
	doc := documentedMetrics(t)
	for name, typ := range doc {
		if !slices.Contains([]string{"counter", "gauge", "histogram", ""}, typ) {
			t.Errorf("%s: %s has type %q, want counter, gauge or histogram", operationsFile, name, typ)
		}
	}

	used := map[string][]string{} // metric -> where
	for where, expr := range loadDashboard(t).exprs(true) {
		for _, name := range metricRE.FindAllString(expr, -1) {
			used[name] = append(used[name], dashboardFile+" "+where)
		}
	}
	for _, file := range []string{rulesFile, rulesTestFile} {
		for i, line := range strings.Split(readFile(t, file), "\n") {
			for _, name := range metricRE.FindAllString(line, -1) {
				used[name] = append(used[name], fmt.Sprintf("%s:%d", file, i+1))
			}
		}
	}
	if len(used) == 0 {
		t.Fatal("found no processor_ metric in the dashboard or the rules")
	}
	var names []string
	for name := range used {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if undocumented(doc, name) {
			t.Errorf("%s is not in the metric table of %s; used in %s", name, operationsFile, strings.Join(used[name], ", "))
		}
	}

	// And the dashboard shows every documented metric of the processor's
	// own (the kprom family aside).
	onDashboard := map[string]bool{}
	for _, expr := range loadDashboard(t).exprs(false) {
		for _, name := range metricRE.FindAllString(expr, -1) {
			onDashboard[name] = true
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				onDashboard[strings.TrimSuffix(name, suffix)] = true
			}
		}
	}
	for name := range doc {
		if !strings.HasPrefix(name, kafkaPrefix) && !onDashboard[name] {
			t.Errorf("%s is documented in %s but on no panel of %s", name, operationsFile, dashboardFile)
		}
	}
}

// alertBlocks splits alerts.yml into its alerts: name to the rule's text.
func alertBlocks(t *testing.T) map[string]string {
	t.Helper()
	text := readFile(t, rulesFile)
	re := regexp.MustCompile(`(?m)^\s*- alert:\s*(\S+)\s*$`)
	locs := re.FindAllStringSubmatchIndex(text, -1)
	if len(locs) == 0 {
		t.Fatalf("%s: no alerts", rulesFile)
	}
	out := map[string]string{}
	for i, loc := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		out[text[loc[2]:loc[3]]] = text[loc[0]:end]
	}
	return out
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestAlertsHaveLabelsRunbooksAndTests(t *testing.T) {
	if !regexp.MustCompile(`(?m)^\s*- name:\s*processor\s*$`).MatchString(readFile(t, rulesFile)) {
		t.Errorf("%s: no rule group named processor", rulesFile)
	}

	anchors := map[string]bool{}
	for _, line := range strings.Split(readFile(t, operationsFile), "\n") {
		if strings.HasPrefix(line, "#") {
			anchors[githubAnchor(strings.TrimLeft(line, "#"))] = true
		}
	}

	// Which alerts the unit tests expect to fire, and which to stay silent.
	fires, silent := map[string]bool{}, map[string]bool{}
	current := ""
	for _, line := range strings.Split(readFile(t, rulesTestFile), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "alertname:"); ok {
			current = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "exp_alerts:"); ok && current != "" {
			if strings.TrimSpace(v) == "[]" {
				silent[current] = true
			} else {
				fires[current] = true
			}
			current = ""
		}
	}

	runbookRE := regexp.MustCompile(`runbook_url:\s*"?([^"\s]+)"?`)
	for name, block := range alertBlocks(t) {
		for _, want := range []string{"severity:", "summary:", "description:", "runbook_url:"} {
			if !strings.Contains(block, want) {
				t.Errorf("alert %s has no %s", name, strings.TrimSuffix(want, ":"))
			}
		}
		if m := runbookRE.FindStringSubmatch(block); m != nil {
			page, anchor, _ := strings.Cut(m[1], "#")
			if !strings.HasSuffix(page, "/docs/operations.md") {
				t.Errorf("alert %s: runbook_url %s is not docs/operations.md", name, m[1])
			}
			if anchor != strings.ToLower(name) || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url anchor #%s: want #%s, a heading of %s", name, anchor, strings.ToLower(name), operationsFile)
			}
		}
		if !fires[name] {
			t.Errorf("alert %s: no case in %s where it fires", name, rulesTestFile)
		}
		if !silent[name] {
			t.Errorf("alert %s: no case in %s where it must not fire (exp_alerts: [])", name, rulesTestFile)
		}
	}
}

// promtool returns the path of promtool. Without it the test is skipped,
// except under CI, which must install it.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatal("promtool not found, and CI is set: CI must install it (apt-get install -y prometheus)")
	}
	t.Skip("promtool not found: install the Debian package prometheus (apt-get install -y prometheus) to check and test the alerting rules")
	return ""
}

// runPromtool runs promtool with args in the module's root, so that paths
// and messages read as they would on the command line.
func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = ".."
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out.String())
}

func TestPromtoolCheckRules(t *testing.T) {
	runPromtool(t, "check", "rules", filepath.Join("deploy", rulesFile))
}

func TestPromtoolTestRules(t *testing.T) {
	runPromtool(t, "test", "rules", filepath.Join("deploy", rulesTestFile))
}

// TestPromtoolCheckConfig checks the Compose stack's Prometheus
// configuration, and through its rule_files the alerting rules beside it.
func TestPromtoolCheckConfig(t *testing.T) {
	runPromtool(t, "check", "config", filepath.Join("deploy", promConfigFile))
}

// TestDashboardQueriesParse has promtool parse every query of the
// dashboard, written as a recording rule with Grafana's variables filled in.
func TestDashboardQueriesParse(t *testing.T) {
	promtool(t)
	fill := strings.NewReplacer(
		`"$job"`, `".+"`, `"$namespace"`, `".+"`, `"$group"`, `".+"`, `"$instance"`, `".+"`,
		"$__rate_interval", "1m", "$__range", "1h", "$__interval", "1m",
	)
	exprs := loadDashboard(t).exprs(false)
	var wheres []string
	for where := range exprs {
		wheres = append(wheres, where)
	}
	sort.Strings(wheres)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, where := range wheres {
		expr := fill.Replace(exprs[where])
		if strings.Contains(expr, "$") {
			t.Errorf("%s: a Grafana variable this test does not know: %s", where, expr)
		}
		fmt.Fprintf(&b, "      # %s\n      - record: dashboard:query_%d\n        expr: %s\n", where, i, strconv.Quote(expr))
	}
	file := filepath.Join(t.TempDir(), "dashboard_rules.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	runPromtool(t, "check", "rules", abs)
}

// TestDocumentedRuleExamplesCheck has promtool check the example alerting
// rules of docs/operations.md (the broker-side lag backstop, the
// kube-state-metrics restart rule): every YAML block with an alert in it,
// a whole rule file or a list of rules, which it wraps in a group.
func TestDocumentedRuleExamplesCheck(t *testing.T) {
	promtool(t)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(readFile(t, operationsFile), -1)
	n := 0
	for _, m := range blocks {
		block := m[1]
		if !strings.Contains(block, "alert:") {
			continue
		}
		if !strings.HasPrefix(block, "groups:") {
			lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
			indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
			var b strings.Builder
			b.WriteString("groups:\n  - name: example\n    rules:\n")
			for _, l := range lines {
				if len(l) >= indent {
					l = l[indent:]
				}
				b.WriteString("      " + l + "\n")
			}
			block = b.String()
		}
		n++
		file := filepath.Join(t.TempDir(), fmt.Sprintf("example_%d.yml", n))
		if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
			t.Fatal(err)
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			t.Fatal(err)
		}
		runPromtool(t, "check", "rules", abs)
	}
	if n < 3 {
		t.Errorf("%s: %d YAML blocks with example alerts, want 3 (kube-state-metrics restarts, kafka-exporter, KMinion)", operationsFile, n)
	}
}

// TestAvailabilityAlerts: the rules that fire when the processor is gone,
// which its own (self-reported) series cannot do, are there and read what
// Prometheus sees of it.
func TestAvailabilityAlerts(t *testing.T) {
	blocks := alertBlocks(t)
	for name, want := range map[string][]string{
		"ProcessorAllInstancesDown": {`group by (job, namespace, group) (max_over_time(up{job="processor"}[1h]))`, `(up{job="processor"} == 1)`, `absent_over_time(up{job="processor"}[1h])`, "job: processor", "for: 5m"},
		"ProcessorInstanceDown":     {`up{job="processor"} == 0`, "for: 5m"},
		"ProcessorNotReady":         {"processor_ready", "== 0", "for: 10m"},
		"ProcessorCrashLooping":     {`changes(process_start_time_seconds{job="processor"}[15m]) > 2`},
	} {
		block, ok := blocks[name]
		if !ok {
			t.Errorf("%s: no alert %s", rulesFile, name)
			continue
		}
		for _, w := range want {
			if !strings.Contains(block, w) {
				t.Errorf("alert %s does not have %s", name, w)
			}
		}
	}
	// The job the rules select is the one prometheus.yml scrapes.
	if !regexp.MustCompile(`(?m)^\s*- job_name: processor\s*$`).MatchString(readFile(t, promConfigFile)) {
		t.Errorf("%s: no scrape job named processor, which the availability alerts select", promConfigFile)
	}
}
