package deploy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/streamproc/processor/config"
)

// go test ./deploy/ -run TestK8sPrometheusRuleMatchesAlerts -update
// (make k8s-rules) writes the monitoring component's PrometheusRule from
// the alerting rules.
var update = flag.Bool("update", false, "write the generated files (the PrometheusRule of components/monitoring) instead of comparing them")

const (
	monitoringDir      = "k8s/components/monitoring"
	kedaDir            = "k8s/components/keda"
	prometheusRuleFile = monitoringDir + "/prometheusrule.yaml"
	// The ScaledObject's annotation that says how many partitions the
	// input has.
	partitionsAnnotation = "streamproc.github.io/input-partitions"
)

// prometheusRule returns the PrometheusRule that carries the rule groups
// of alerts (the text of alerts.yml): its groups: and everything after it,
// comments included, moved under spec.
func prometheusRule(alerts string) (string, error) {
	lines := strings.Split(alerts, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "groups:") })
	if start < 0 {
		return "", fmt.Errorf("%s: no top-level groups:", rulesFile)
	}
	var b strings.Builder
	b.WriteString(`# The alerting rules of deploy/prometheus/alerts.yml as a PrometheusRule
# of the Prometheus Operator. Generated: do not edit. Edit alerts.yml and
# run make k8s-rules (go test ./deploy/ -run TestK8sPrometheusRuleMatchesAlerts
# -update); go test ./deploy/ fails while the two differ. The comments and
# runbooks of the rules are in alerts.yml and docs/operations.md.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: processor
  labels:
    app.kubernetes.io/name: processor
spec:
`)
	for i, l := range lines[start:] {
		if i > 0 && l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#") {
			return "", fmt.Errorf("%s: top-level %q after groups:, which a PrometheusRule cannot carry", rulesFile, l)
		}
		if l != "" {
			b.WriteString("  ")
		}
		b.WriteString(l)
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

func TestK8sPrometheusRuleMatchesAlerts(t *testing.T) {
	alerts := readFile(t, rulesFile)
	want, err := prometheusRule(alerts)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(prometheusRuleFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", prometheusRuleFile)
	}
	got := readFile(t, prometheusRuleFile)
	if got != want {
		t.Errorf("%s is not what %s makes: run make k8s-rules", prometheusRuleFile, rulesFile)
	}

	// The same rules, read as YAML.
	var a struct {
		Groups []any `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(alerts), &a); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var pr struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			Groups []any `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(got), &pr); err != nil {
		t.Fatalf("%s: %v", prometheusRuleFile, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s: %s %s, want monitoring.coreos.com/v1 PrometheusRule", prometheusRuleFile, pr.APIVersion, pr.Kind)
	}
	if len(a.Groups) == 0 || !reflect.DeepEqual(a.Groups, pr.Spec.Groups) {
		t.Errorf("%s: its groups are not those of %s", prometheusRuleFile, rulesFile)
	}
}

// TestPrometheusRuleGenerator: the generator keeps every rule, a rule
// added to alerts.yml included, and refuses what it cannot carry.
func TestPrometheusRuleGenerator(t *testing.T) {
	in := "# header\ngroups:\n  - name: processor\n    rules:\n      # a comment\n      - alert: A\n        expr: |\n          up == 0\n\n      - alert: B\n        expr: up > 1\n"
	out, err := prometheusRule(in)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec struct {
			Groups []struct {
				Name  string
				Rules []struct{ Alert, Expr string }
			}
		}
	}
	if err := yaml.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(pr.Spec.Groups) != 1 || len(pr.Spec.Groups[0].Rules) != 2 ||
		pr.Spec.Groups[0].Rules[0].Expr != "up == 0\n" || pr.Spec.Groups[0].Rules[1].Alert != "B" {
		t.Errorf("generated %+v from\n%s\nas\n%s", pr.Spec, in, out)
	}
	if !strings.Contains(out, "      # a comment\n") {
		t.Errorf("the comments are lost:\n%s", out)
	}
	if _, err := prometheusRule("groups: []\nother: 1\n"); err == nil {
		t.Error("a top-level key after groups: was accepted")
	}
}

type podMonitorSpec struct {
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	JobLabel            string `yaml:"jobLabel"`
	PodMetricsEndpoints []struct {
		Port        string `yaml:"port"`
		Path        string `yaml:"path"`
		Relabelings []struct {
			SourceLabels []string `yaml:"sourceLabels"`
			TargetLabel  string   `yaml:"targetLabel"`
			Replacement  string   `yaml:"replacement"`
		} `yaml:"relabelings"`
	} `yaml:"podMetricsEndpoints"`
}

func TestK8sMonitoringComponent(t *testing.T) {
	base := loadK8s(t)
	sts, spec, c := theStatefulSet(t, base)
	e := podEnv(t, base, sts, c)
	podLabels := spec.Template.Metadata.Labels

	k := readKustomization(t, monitoringDir)
	if k.Kind != "Component" {
		t.Errorf("%s: kind %q, want Component", monitoringDir, k.Kind)
	}
	objs := loadKustomize(t, monitoringDir)
	var pm podMonitorSpec
	mon := theOnly(t, objs, "PodMonitor", &pm)
	if mon.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("%s: apiVersion %s, want monitoring.coreos.com/v1", mon, mon.APIVersion)
	}
	if !labelsMatch(pm.Selector.MatchLabels, podLabels) {
		t.Errorf("%s: selector %v does not select the processor's pods %v", mon, pm.Selector.MatchLabels, podLabels)
	}
	group := e.get(config.EnvName("GROUP"))
	paths := servedPaths(t)
	if len(pm.PodMetricsEndpoints) != 1 {
		t.Fatalf("%s: %d endpoints, want 1", mon, len(pm.PodMetricsEndpoints))
	}
	ep := pm.PodMetricsEndpoints[0]
	var port yaml.Node
	port.Value = ep.Port
	if got := probePort(t, port, c); got != httpPort(t, e) {
		t.Errorf("%s: port %s is %d, want the port of PROCESSOR_HTTP_ADDR", mon, ep.Port, got)
	}
	if ep.Path != "/metrics" || !paths[ep.Path] {
		t.Errorf("%s: path %q, want /metrics", mon, ep.Path)
	}
	// job: "processor", the scrape job the alerts select; group: a pod
	// label whose value is PROCESSOR_GROUP, which the keda component's
	// query selects by.
	instance, job, groupLabel, namespace := false, false, false, false
	for _, r := range ep.Relabelings {
		instance = instance || (r.TargetLabel == "instance" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_name"}))
		namespace = namespace || (r.TargetLabel == "namespace" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_namespace"}))
		job = job || (r.TargetLabel == "job" && len(r.SourceLabels) == 0 && r.Replacement == "processor")
		if r.TargetLabel == "group" && len(r.SourceLabels) == 1 {
			label, ok := strings.CutPrefix(r.SourceLabels[0], "__meta_kubernetes_pod_label_")
			groupLabel = ok && podLabelValue(podLabels, label) == group
		}
	}
	if !job {
		t.Errorf("%s: no relabeling sets job to processor, the job deploy/prometheus/alerts.yml selects", mon)
	}
	if !groupLabel {
		t.Errorf("%s: no relabeling sets group from a pod label whose value is PROCESSOR_GROUP %q (pod labels %v)", mon, group, podLabels)
	}
	if !instance {
		t.Errorf("%s: no relabeling of instance to the pod's name", mon)
	}
	if !namespace {
		t.Errorf("%s: no relabeling of namespace to the pod's namespace", mon)
	}

	// The rules: the PrometheusRule is in the component (its contents are
	// TestK8sPrometheusRuleMatchesAlerts's).
	if len(findObjects(objs, "PrometheusRule")) != 1 {
		t.Errorf("%s: want one PrometheusRule", monitoringDir)
	}
	if !slices.Contains(k.Resources, filepath.Base(prometheusRuleFile)) {
		t.Errorf("%s: resources %v lack %s", monitoringDir, k.Resources, filepath.Base(prometheusRuleFile))
	}
	// The patch turns off the annotations' scrape of a Service the base has.
	if _, ok := findObject(base, "Service", "processor-metrics"); !ok {
		t.Errorf("%s patches Service processor-metrics, which the base does not have", monitoringDir)
	}
}

type hpaPolicy struct {
	Type          string `yaml:"type"`
	Value         int    `yaml:"value"`
	PeriodSeconds int    `yaml:"periodSeconds"`
}

type hpaRules struct {
	StabilizationWindowSeconds *int        `yaml:"stabilizationWindowSeconds"`
	SelectPolicy               string      `yaml:"selectPolicy"`
	Policies                   []hpaPolicy `yaml:"policies"`
}

type scaledObjectSpec struct {
	ScaleTargetRef struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Name       string `yaml:"name"`
	} `yaml:"scaleTargetRef"`
	MinReplicaCount *int `yaml:"minReplicaCount"`
	MaxReplicaCount *int `yaml:"maxReplicaCount"`
	Advanced        struct {
		HorizontalPodAutoscalerConfig struct {
			Behavior struct {
				ScaleUp   *hpaRules `yaml:"scaleUp"`
				ScaleDown *hpaRules `yaml:"scaleDown"`
			} `yaml:"behavior"`
		} `yaml:"horizontalPodAutoscalerConfig"`
	} `yaml:"advanced"`
	Triggers []struct {
		Type       string            `yaml:"type"`
		MetricType string            `yaml:"metricType"`
		Metadata   map[string]string `yaml:"metadata"`
	} `yaml:"triggers"`
}

// matchers returns the label matchers metric{...} has in query, or false
// when query does not use metric.
func matchers(query, metric string) (map[string]string, bool) {
	m := regexp.MustCompile(regexp.QuoteMeta(metric) + `\s*(\{([^}]*)\})?`).FindStringSubmatch(query)
	if m == nil {
		return nil, false
	}
	out := map[string]string{}
	for _, kv := range regexp.MustCompile(`(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"`).FindAllStringSubmatch(m[2], -1) {
		out[kv[1]+kv[2]] = kv[3]
	}
	return out, true
}

func TestK8sKedaComponent(t *testing.T) {
	base := loadK8s(t)
	sts, spec, c := theStatefulSet(t, base)
	e := podEnv(t, base, sts, c)

	if k := readKustomization(t, kedaDir); k.Kind != "Component" {
		t.Errorf("%s: kind %q, want Component", kedaDir, k.Kind)
	}
	// The StatefulSet's replicas removed, so that kubectl apply does not
	// reset what the HPA chose.
	var kp struct {
		Patches []struct {
			Target struct {
				Kind string `yaml:"kind"`
				Name string `yaml:"name"`
			} `yaml:"target"`
			Patch string `yaml:"patch"`
		} `yaml:"patches"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(kedaDir, "kustomization.yaml"))), &kp); err != nil {
		t.Fatal(err)
	}
	removed := false
	for _, p := range kp.Patches {
		var ops []struct{ Op, Path string }
		if p.Target.Kind != "StatefulSet" || p.Target.Name != sts.Metadata.Name || yaml.Unmarshal([]byte(p.Patch), &ops) != nil {
			continue
		}
		for _, op := range ops {
			removed = removed || (op.Op == "remove" && op.Path == "/spec/replicas")
		}
	}
	if !removed {
		t.Errorf("%s: no patch removing the StatefulSet's /spec/replicas: kubectl apply would reset the HPA's count", kedaDir)
	}
	objs := loadKustomize(t, kedaDir)
	var so scaledObjectSpec
	obj := theOnly(t, objs, "ScaledObject", &so)
	if obj.APIVersion != "keda.sh/v1alpha1" {
		t.Errorf("%s: apiVersion %s, want keda.sh/v1alpha1", obj, obj.APIVersion)
	}
	ref := so.ScaleTargetRef
	if ref.Kind != "StatefulSet" || ref.Name != sts.Metadata.Name || cmpOr(ref.APIVersion, "apps/v1") != "apps/v1" {
		t.Errorf("%s: scaleTargetRef %+v, want apps/v1 StatefulSet %s", obj, ref, sts.Metadata.Name)
	}

	// Replicas: at least one, at most the input's partitions.
	parts, err := strconv.Atoi(obj.Metadata.Annotations[partitionsAnnotation])
	if err != nil || parts < 1 {
		t.Errorf("%s: annotation %s %q: want the input's partition count", obj, partitionsAnnotation, obj.Metadata.Annotations[partitionsAnnotation])
	}
	if so.MinReplicaCount == nil || so.MaxReplicaCount == nil {
		t.Fatalf("%s: minReplicaCount %s, maxReplicaCount %s: want both set", obj, intp(so.MinReplicaCount), intp(so.MaxReplicaCount))
	}
	lo, hi := *so.MinReplicaCount, *so.MaxReplicaCount
	if lo < 1 || lo > hi {
		t.Errorf("%s: minReplicaCount %d, maxReplicaCount %d: want 1 <= min <= max", obj, lo, hi)
	}
	if hi > parts {
		t.Errorf("%s: maxReplicaCount %d exceeds the input's %d partitions (%s): the pods beyond would stay idle", obj, hi, parts, partitionsAnnotation)
	}
	if spec.Replicas != nil && (*spec.Replicas < lo || *spec.Replicas > hi) {
		t.Errorf("%s: replicas %d outside the ScaledObject's %d-%d", sts, *spec.Replicas, lo, hi)
	}

	// Slow scaling: every change is a rebalance that aborts the open
	// transactions of the partitions that move.
	b := so.Advanced.HorizontalPodAutoscalerConfig.Behavior
	if b.ScaleDown == nil || b.ScaleDown.StabilizationWindowSeconds == nil || *b.ScaleDown.StabilizationWindowSeconds < 300 {
		t.Errorf("%s: scaleDown.stabilizationWindowSeconds: want 300 or more", obj)
	}
	if b.ScaleUp == nil || b.ScaleUp.StabilizationWindowSeconds == nil || *b.ScaleUp.StabilizationWindowSeconds < 60 {
		t.Errorf("%s: scaleUp.stabilizationWindowSeconds: want 60 or more", obj)
	}
	for dir, r := range map[string]*hpaRules{"scaleUp": b.ScaleUp, "scaleDown": b.ScaleDown} {
		if r == nil || len(r.Policies) == 0 {
			t.Errorf("%s: %s has no policies (the HPA's default doubles at once)", obj, dir)
			continue
		}
		for _, p := range r.Policies {
			modest := (p.Type == "Pods" && p.Value >= 1 && p.Value <= 2) || (p.Type == "Percent" && p.Value >= 1 && p.Value <= 50)
			if !modest || p.PeriodSeconds < 60 {
				t.Errorf("%s: %s policy %+v: want at most 2 pods or 50%% per 60 s or more", obj, dir, p)
			}
		}
	}

	// The trigger: the processor's own lag through Prometheus.
	if len(so.Triggers) != 1 {
		t.Fatalf("%s: %d triggers, want 1", obj, len(so.Triggers))
	}
	tr := so.Triggers[0]
	if tr.Type != "prometheus" {
		t.Errorf("%s: trigger %q, want prometheus (docs/deploy.md says why not kafka)", obj, tr.Type)
	}
	md := tr.Metadata
	if !strings.HasPrefix(md["serverAddress"], "http://") && !strings.HasPrefix(md["serverAddress"], "https://") {
		t.Errorf("%s: serverAddress %q, want Prometheus's URL", obj, md["serverAddress"])
	}
	if n, err := strconv.ParseFloat(md["threshold"], 64); err != nil || n <= 0 {
		t.Errorf("%s: threshold %q, want a positive number", obj, md["threshold"])
	}
	if md["ignoreNullValues"] != "false" {
		t.Errorf("%s: ignoreNullValues %q, want \"false\": no lag series at all is no reason to scale down", obj, md["ignoreNullValues"])
	}
	q := md["query"]
	ms, ok := matchers(q, "processor_consumer_lag_records")
	if !ok || !strings.HasPrefix(strings.TrimSpace(q), "sum(") {
		t.Errorf("%s: query %q: want the sum of processor_consumer_lag_records", obj, q)
	}
	if group := e.get(config.EnvName("GROUP")); ms["job="] != "processor" || ms["group="] != group {
		t.Errorf("%s: query %q selects job %q and group %q, want job processor and the group %q (the monitoring component's labels)", obj, q, ms["job="], ms["group="], group)
	}
	if _, ok := documentedMetrics(t)["processor_consumer_lag_records"]; !ok {
		t.Errorf("processor_consumer_lag_records is not in %s", operationsFile)
	}
	if tr.MetricType != "" && tr.MetricType != "AverageValue" {
		t.Errorf("%s: metricType %q, want AverageValue (lag per pod)", obj, tr.MetricType)
	}
}

// TestDeployDocListsEveryAlert: docs/deploy.md's table of what fires when
// names every alert of alerts.yml, and no other.
func TestDeployDocListsEveryAlert(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, rulesFile)), &rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var want []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				want = append(want, r.Alert)
			}
		}
	}
	doc := readFile(t, deployDoc)
	i := strings.Index(doc, "### 8. What alerts fire when")
	if i < 0 {
		t.Fatalf("%s: no section \"8. What alerts fire when\"", deployDoc)
	}
	section := doc[i+1:]
	if j := strings.Index(section, "\n### "); j >= 0 {
		section = section[:j]
	}
	var got []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\|").FindAllStringSubmatch(section, -1) {
		got = append(got, m[1])
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s, \"What alerts fire when\": the table lists %v, %s has %v", deployDoc, got, rulesFile, want)
	}
}

// podLabelValue returns the value of the pod label whose Prometheus
// discovery name (non-alphanumerics as _) is name.
func podLabelValue(labels map[string]string, name string) string {
	for k, v := range labels {
		if strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, k) == name {
			return v
		}
	}
	return ""
}
