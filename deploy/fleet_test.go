package deploy

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// Many pipelines on one Prometheus: every scraped series carries the
// pipeline's namespace and group, every rule keeps them, and the rules'
// tests put two pipelines side by side.

const deployDocLabels = "### Labels"

// pipelineLabels are the labels that tell pipelines apart.
var pipelineLabels = []string{"namespace", "group"}

// fleetRules are the availability and lag rules, each tested with two
// pipelines in two namespaces, one in trouble and one healthy.
var fleetRules = []string{
	"ProcessorConsumerLagGrowing", "ProcessorDataLate", "ProcessorNoRecentCommit",
	"ProcessorAllInstancesDown", "ProcessorInstanceDown", "ProcessorNotReady", "ProcessorCrashLooping",
}

// TestRulesKeepPipelineLabels: every aggregation and every match of
// alerts.yml keeps namespace and group, and an absent() of the whole job
// stands only beside a part per pipeline.
func TestRulesKeepPipelineLabels(t *testing.T) {
	clause := regexp.MustCompile(`\b(by|on|without|ignoring)\s*\(([^)]*)\)`)
	for name, block := range alertBlocks(t) {
		_, expr, _ := strings.Cut(block, "expr:")
		expr, _, _ = strings.Cut(expr, "labels:")
		for _, m := range clause.FindAllStringSubmatch(expr, -1) {
			if m[1] == "without" || m[1] == "ignoring" {
				t.Errorf("alert %s: %s(...): list the labels kept instead, namespace and group among them", name, m[1])
				continue
			}
			labels := strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
			for _, l := range pipelineLabels {
				if !slices.Contains(labels, l) {
					t.Errorf("alert %s: %s drops %s: two pipelines would be one series", name, m[0], l)
				}
			}
		}
		if strings.Contains(expr, "absent") && !strings.Contains(expr, "by (job, namespace, group)") {
			t.Errorf("alert %s: absent() alone cannot tell which pipeline is gone; add a part per namespace and group", name)
		}
		// A rule on a series of its own, with no aggregation, keeps every
		// label the scrape set; say nothing of those.
	}
}

// ruleTests is what the tests read of alerts_test.yml.
type ruleTests struct {
	Tests []struct {
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			AlertName string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// seriesLabels parses the labels of a promtool input series.
func seriesLabels(s string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(s, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestRulesTestedWithTwoPipelines: for every availability and lag rule,
// alerts_test.yml has a case with two pipelines in two namespaces whose
// instances have the same name, where the rule fires for one of them
// alone, with its namespace and group.
func TestRulesTestedWithTwoPipelines(t *testing.T) {
	var rt ruleTests
	if err := yaml.Unmarshal([]byte(readFile(t, rulesTestFile)), &rt); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	covered := map[string]bool{}
	for _, tc := range rt.Tests {
		// The namespaces of each instance name, among the processor's series.
		namespaces := map[string]map[string]bool{}
		groups := map[string]string{} // namespace -> group
		for _, in := range tc.InputSeries {
			l := seriesLabels(in.Series)
			if l["job"] != "processor" {
				continue
			}
			if namespaces[l["instance"]] == nil {
				namespaces[l["instance"]] = map[string]bool{}
			}
			namespaces[l["instance"]][l["namespace"]] = true
			groups[l["namespace"]] = l["group"]
		}
		shared := false
		for _, ns := range namespaces {
			shared = shared || len(ns) >= 2
		}
		if !shared {
			continue
		}
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) == 0 {
				continue
			}
			fired := map[string]bool{}
			right := true
			for _, a := range at.ExpAlerts {
				ns := a.ExpLabels["namespace"]
				fired[ns] = true
				right = right && ns != "" && a.ExpLabels["group"] == groups[ns]
			}
			if right && len(fired) == 1 && len(groups) >= 2 {
				covered[at.AlertName] = true
			}
		}
	}
	for _, r := range fleetRules {
		if !covered[r] {
			t.Errorf("%s: no case where %s fires for one of two pipelines (two namespaces, the same instance names) and not the other", rulesTestFile, r)
		}
	}
	blocks := alertBlocks(t)
	for _, r := range fleetRules {
		if _, ok := blocks[r]; !ok {
			t.Errorf("%s: no alert %s", rulesFile, r)
		}
	}
}

// docLabels returns the labels the table under "### Labels" in
// docs/deploy.md names (first column, in backquotes).
func docLabels(t *testing.T) []string {
	t.Helper()
	doc := readFile(t, deployDoc)
	i := strings.Index(doc, "\n"+deployDocLabels+"\n")
	if i < 0 {
		t.Fatalf("%s: no section %q", deployDoc, deployDocLabels)
	}
	section := doc[i+1:]
	if j := strings.Index(section[1:], "\n#"); j >= 0 {
		section = section[:j+1]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\|").FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

// TestDeployDocLabelsAreTheManifests: the labels docs/deploy.md says
// every series carries are those the PodMonitor sets and those the
// Compose stack's Prometheus gives its targets, and they include the
// labels every rule keeps.
func TestDeployDocLabelsAreTheManifests(t *testing.T) {
	doc := docLabels(t)
	for _, l := range append([]string{"job", "instance"}, pipelineLabels...) {
		if !slices.Contains(doc, l) {
			t.Errorf("%s, %q: %s is not listed (got %v)", deployDoc, deployDocLabels, l, doc)
		}
	}

	// The PodMonitor's relabelings.
	var pm podMonitorSpec
	mon := theOnly(t, loadKustomize(t, monitoringDir), "PodMonitor", &pm)
	var k8s []string
	for _, ep := range pm.PodMetricsEndpoints {
		for _, r := range ep.Relabelings {
			if !slices.Contains(k8s, r.TargetLabel) {
				k8s = append(k8s, r.TargetLabel)
			}
		}
	}
	sort.Strings(k8s)
	if !slices.Equal(k8s, doc) {
		t.Errorf("%s sets %v, %s (%q) lists %v", mon, k8s, deployDoc, deployDocLabels, doc)
	}

	// Compose: job and instance from the scrape config, the rest static.
	var pc struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, promConfigFile)), &pc); err != nil {
		t.Fatalf("%s: %v", promConfigFile, err)
	}
	group := loadCompose(t).env(loadCompose(t).processors()[0]).get("PROCESSOR_GROUP")
	for _, sc := range pc.ScrapeConfigs {
		if sc.JobName != "processor" {
			continue
		}
		for _, st := range sc.StaticConfigs {
			compose := []string{"instance", "job"}
			for l := range st.Labels {
				compose = append(compose, l)
			}
			sort.Strings(compose)
			if !slices.Equal(compose, doc) {
				t.Errorf("%s: job processor's targets get %v, %s (%q) lists %v", promConfigFile, compose, deployDoc, deployDocLabels, doc)
			}
			if st.Labels["group"] != group {
				t.Errorf("%s: group %q, but the Compose processors' PROCESSOR_GROUP is %q", promConfigFile, st.Labels["group"], group)
			}
		}
	}
}
