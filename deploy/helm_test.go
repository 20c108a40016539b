package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/streamproc/processor/config"
)

// The Helm chart and the kustomize base are one deployment written twice:
// these tests render both and compare the objects that matter, check the
// chart's options (monitoring, KEDA, state volume, token), and validate
// every rendering against the Kubernetes schemas.

const (
	chartDir         = "helm/processor"
	chartRulesFile   = chartDir + "/files/alerts.yml"
	chartKubeVersion = "1.29.0"
)

// validateVersions are the Kubernetes versions whose schemas the rendered
// objects must satisfy: the oldest the chart supports (Chart.yaml's
// kubeVersion) and the newest that the pinned kubernetes-validate ships.
var validateVersions = []string{chartKubeVersion, "1.37.0"}

// helmTemplate renders the chart as release in namespace orders with args
// (--set ...).
func helmTemplate(t *testing.T, release string, args ...string) []k8sObject {
	t.Helper()
	all := append([]string{"template", release, chartDir, "--namespace", "orders", "--kube-version", chartKubeVersion}, args...)
	return parseRendered(t, "helm "+strings.Join(args, " "), runTool(t, tool(t, "helm"), all...))
}

// allOptions turns on every option of the chart.
var allOptions = []string{"--set", "monitoring.podMonitor.enabled=true,monitoring.prometheusRule.enabled=true,keda.enabled=true," +
	"state.persistence.enabled=true,state.persistence.size=50Gi,state.persistence.storageClass=fast-ssd,httpToken.token=t0ken,transforms={jq,aggregate}," +
	"kafka.oauth.enabled=true,kafka.oauth.tokenURL=https://idp.example.com/oauth2/token,kafka.oauth.clientId=orders-enricher,kafka.oauth.clientSecret=s3cret"}

func TestHelmLint(t *testing.T) {
	h := tool(t, "helm")
	runTool(t, h, "lint", "--strict", chartDir, "--kube-version", chartKubeVersion)
	runTool(t, h, append([]string{"lint", "--strict", chartDir, "--kube-version", chartKubeVersion}, allOptions...)...)
}

// generatedName matches the hash suffix kustomize gives generated objects.
var generatedName = regexp.MustCompile(`^(processor-(config|kafka))-[a-z0-9]{10}$`)

// comparable is an object reduced to what must be the same in both
// renderings: its kind and name (without kustomize's hash), its spec (or
// data) with generated names unhashed, selectors and the pod template's
// annotations left out (the chart selects by the group too, and rolls its
// pods by checksums where kustomize renames).
func comparable(t *testing.T, o k8sObject) (string, any) {
	t.Helper()
	var v any
	switch o.Kind {
	case "ConfigMap":
		v = o.Data
	case "Secret":
		keys := []string{}
		for k := range secretKeys(o) {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		v = keys
	case "ServiceAccount":
		v = o.AutomountServiceAccountToken != nil && *o.AutomountServiceAccountToken
	default:
		if err := o.Spec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
	}
	var strip func(any) any
	strip = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				if k == "selector" || k == "podSelector" || k == "labelSelector" || k == "annotations" {
					continue
				}
				out[k] = strip(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = strip(e)
			}
			return out
		case string:
			if m := generatedName.FindStringSubmatch(x); m != nil {
				return m[1]
			}
		}
		return x
	}
	name := o.Metadata.Name
	if m := generatedName.FindStringSubmatch(name); m != nil {
		name = m[1]
	}
	return o.Kind + "/" + name, strip(v)
}

// TestHelmMatchesKustomize: the chart with its default values, as release
// orders-enricher named processor, renders what the kustomize base does:
// the same objects, and the same StatefulSet (pod spec, env, probes,
// ports, security context, volumes), Services, NetworkPolicy,
// PodDisruptionBudget, ServiceAccount and settings.
func TestHelmMatchesKustomize(t *testing.T) {
	base := kustomizeBuild(t, k8sDir)
	chart := helmTemplate(t, "orders-enricher", "--set", "fullnameOverride=processor")
	want, got := map[string]any{}, map[string]any{}
	for _, o := range base {
		k, v := comparable(t, o)
		want[k] = v
	}
	for _, o := range chart {
		k, v := comparable(t, o)
		got[k] = v
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: the chart renders no %s", chartDir, k)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			wy, _ := yaml.Marshal(w)
			gy, _ := yaml.Marshal(g)
			t.Errorf("%s differs between %s and %s:\n--- kustomize\n%s--- helm\n%s", k, k8sDir, chartDir, wy, gy)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s renders %s, which %s does not have", chartDir, k, k8sDir)
		}
	}

	// The chart's selectors select its pods, and only the pipeline's.
	_, spec, _ := theStatefulSet(t, chart)
	pods := spec.Template.Metadata.Labels
	if pods["app.kubernetes.io/instance"] != "orders-enricher" {
		t.Errorf("%s: pod labels %v, want app.kubernetes.io/instance: the group", chartDir, pods)
	}
	for _, o := range chart {
		var s struct {
			Selector    map[string]any `yaml:"selector"`
			PodSelector map[string]any `yaml:"podSelector"`
		}
		if o.Kind == "ConfigMap" || o.Kind == "Secret" || o.Kind == "ServiceAccount" || o.Spec.Decode(&s) != nil {
			continue
		}
		sel := s.Selector
		if m, ok := sel["matchLabels"].(map[string]any); ok {
			sel = m
		}
		if s.PodSelector != nil {
			sel, _ = s.PodSelector["matchLabels"].(map[string]any)
		}
		labels := map[string]string{}
		for k, v := range sel {
			labels[k], _ = v.(string)
		}
		if len(labels) < 2 || !labelsMatch(labels, pods) {
			t.Errorf("%s: selector %v: want the pods' name and group %v", o, labels, pods)
		}
	}
}

// TestHelmOptions renders the chart with every option on: the state
// directory on a claim per pod, the token file mounted, the PodMonitor's
// labels those docs/deploy.md lists, the rules alerts.yml's, and the KEDA
// query of the release's namespace and group.
func TestHelmOptions(t *testing.T) {
	objs := helmTemplate(t, "orders-enricher", append([]string{"--set", "fullnameOverride=processor"}, allOptions...)...)
	if got := stateVolume(t, objs); got != "claim 50Gi fast-ssd" {
		t.Errorf("%s with state.persistence: the state directory is on %s, want claim 50Gi fast-ssd", chartDir, got)
	}
	sts, spec, c := theStatefulSet(t, objs)
	if spec.Replicas != nil {
		t.Errorf("%s with keda: replicas %d, which the HPA owns", sts, *spec.Replicas)
	}
	e := podEnv(t, objs, sts, c)
	checkKnownVars(t, []envSet{e})
	tokenFile := e.get(config.EnvName("HTTP_TOKEN_FILE"))
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "http-token" && filepath.Dir(tokenFile) == m.MountPath)
	}
	if tokenFile == "" || !mounted {
		t.Errorf("%s with httpToken: PROCESSOR_HTTP_TOKEN_FILE=%q is not in the mounted token Secret", sts, tokenFile)
	}

	var pm podMonitorSpec
	mon := theOnly(t, objs, "PodMonitor", &pm)
	var labels []string
	for _, ep := range pm.PodMetricsEndpoints {
		for _, r := range ep.Relabelings {
			labels = append(labels, r.TargetLabel)
		}
	}
	sort.Strings(labels)
	if doc := docLabels(t); !slices.Equal(labels, doc) {
		t.Errorf("%s sets %v, %s (%q) lists %v", mon, labels, deployDoc, deployDocLabels, doc)
	}

	var rules struct {
		Groups []any `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, rulesFile)), &rules); err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Groups []any `yaml:"groups"`
	}
	theOnly(t, objs, "PrometheusRule", &pr)
	if len(pr.Groups) == 0 || !reflect.DeepEqual(pr.Groups, rules.Groups) {
		t.Errorf("%s: the PrometheusRule's groups are not those of %s", chartDir, rulesFile)
	}

	var so scaledObjectSpec
	theOnly(t, objs, "ScaledObject", &so)
	if len(so.Triggers) != 1 {
		t.Fatalf("%s: %d triggers", chartDir, len(so.Triggers))
	}
	ms, _ := matchers(so.Triggers[0].Metadata["query"], "processor_consumer_lag_records")
	if ms["job="] != "processor" || ms["namespace="] != "orders" || ms["group="] != e.get(config.EnvName("GROUP")) {
		t.Errorf("%s: KEDA query %q: want job processor, the release's namespace and its group", chartDir, so.Triggers[0].Metadata["query"])
	}
	if so.MaxReplicaCount == nil || so.MinReplicaCount == nil || *so.MaxReplicaCount < *so.MinReplicaCount {
		t.Errorf("%s: replica counts %s-%s", chartDir, intp(so.MinReplicaCount), intp(so.MaxReplicaCount))
	}

	var np networkPolicySpec
	theOnly(t, objs, "NetworkPolicy", &np)
	for _, r := range np.Ingress {
		if len(r.From) == 0 {
			t.Errorf("%s: an ingress rule without from: the http port is open to every namespace", chartDir)
		}
	}
}

// TestHelmRulesMatchAlerts: the chart's copy of the rules is alerts.yml
// (-update, which make k8s-rules passes, writes it).
func TestHelmRulesMatchAlerts(t *testing.T) {
	want := readFile(t, rulesFile)
	if *update {
		if err := os.WriteFile(chartRulesFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if readFile(t, chartRulesFile) != want {
		t.Errorf("%s is not %s: run make k8s-rules", chartRulesFile, rulesFile)
	}
}

// TestRenderedObjectsValidate validates the renderings (the kustomize
// base, an overlay with every component, the chart by default and with
// every option) with kubernetes-validate --strict against the pinned
// versions' schemas, which the package ships (no network). The
// custom resources (PodMonitor, PrometheusRule, ScaledObject) have no
// schema there and are only warned about.
func TestRenderedObjectsValidate(t *testing.T) {
	kv := validator(t)
	dir := t.TempDir()
	files := map[string][]string{
		"kustomize-base.yaml": {"kustomize", k8sDir},
		"kustomize-all.yaml":  {"kustomize", overlay(t, []string{"monitoring", "keda", "state-volume", "http-token", "oauth"}, "")},
		"helm-default.yaml":   {"helm"},
		"helm-all.yaml":       append([]string{"helm"}, allOptions...),
	}
	var paths []string
	for name, how := range files {
		var out []byte
		if how[0] == "kustomize" {
			cmd, args := tool(t, "kustomize"), []string{"build", how[1]}
			if len(cmd) > 1 {
				args = args[1:]
			}
			out = runTool(t, cmd, args...)
		} else {
			out = runTool(t, tool(t, "helm"), append([]string{"template", "orders-enricher", chartDir, "--namespace", "orders", "--kube-version", chartKubeVersion}, how[1:]...)...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, v := range validateVersions {
		out := runTool(t, kv, append([]string{"--strict", "--kubernetes-version", v}, paths...)...)
		passed := strings.Count(string(out), " passed ")
		if passed < 20 {
			t.Errorf("kubernetes-validate %s: %d objects passed, want every built-in one of the four renderings:\n%s", v, passed, out)
		}
		t.Logf("kubernetes-validate --strict -k %s: %d objects passed", v, passed)
	}
}

// validator returns kubernetes-validate: .ci/run's venv's, or the PATH's;
// missing, the test is skipped, except under CI.
func validator(t *testing.T) []string {
	t.Helper()
	p, err := filepath.Abs(".cache/kubernetes-validate/bin/kubernetes-validate")
	if err == nil {
		if _, err := os.Stat(p); err == nil {
			return []string{p}
		}
	}
	return tool(t, "kubernetes-validate")
}

// TestHelmRefuses: values the chart cannot render correctly fail the
// rendering with a message naming the value, rather than deploy a
// pipeline that would misbehave.
func TestHelmRefuses(t *testing.T) {
	h := tool(t, "helm")
	for _, tc := range []struct{ set, want string }{
		{"settings.PROCESSOR_GROUP=other", "settings.PROCESSOR_GROUP"},
		{"settings.GROUP=other", "not a PROCESSOR_* variable"},
		{"group=", "group (PROCESSOR_GROUP) is required"},
		{"keda.enabled=true,keda.maxReplicaCount=8,keda.inputPartitions=6", "keda.maxReplicaCount exceeds keda.inputPartitions"},
		{"kafka.oauth.enabled=true,kafka.oauth.clientId=c,kafka.oauth.clientSecret=s", "kafka.oauth.tokenURL is required"},
		{"kafka.oauth.enabled=true,kafka.oauth.tokenURL=https://idp/token,kafka.oauth.clientSecret=s", "kafka.oauth.clientId is required"},
		{"kafka.oauth.enabled=true,kafka.oauth.tokenURL=https://idp/token,kafka.oauth.clientId=c", "kafka.oauth.clientSecret (or kafka.oauth.existingSecret) is required"},
	} {
		cmd := exec.Command(h[0], "template", "x", chartDir, "--kube-version", chartKubeVersion, "--set", tc.set)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("helm template --set %s: %v, output:\n%s\nwant a failure saying %q", tc.set, err, out, tc.want)
		}
	}
}
