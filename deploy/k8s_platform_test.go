package deploy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/streamproc/processor/config"
)

const (
	securityFile = "../docs/security.md"
	deployDoc    = "../docs/deploy.md"
)

// acl is one ACL the processor's principal needs, as kafka-acls.sh says
// it: "Read topic orders", "Write transactional-id orders-enricher-
// prefixed".
type acl struct {
	op, resource, name string
	prefixed           bool
}

func (a acl) String() string {
	s := a.op + " " + a.resource + " " + a.name
	if a.prefixed {
		s += " (prefixed)"
	}
	return s
}

func aclStrings(as []acl) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// wantACLs returns the principal and the ACLs the manifests' processor
// needs: from its settings and its Secret.
func wantACLs(t *testing.T) (string, []acl, envSet) {
	t.Helper()
	objs := loadK8s(t)
	sts, _, c := theStatefulSet(t, objs)
	e := podEnv(t, objs, sts, c)
	var user string
	for _, v := range c.Env {
		if v.Name == config.EnvName("SASL_USERNAME") && v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
			sec, _ := findObject(objs, "Secret", v.ValueFrom.SecretKeyRef.Name)
			user = strings.TrimSpace(sec.StringData[v.ValueFrom.SecretKeyRef.Key] + sec.Data[v.ValueFrom.SecretKeyRef.Key])
		}
	}
	if user == "" {
		t.Fatalf("%s: no PROCESSOR_SASL_USERNAME from a Secret", sts)
	}
	group := e.get(config.EnvName("GROUP"))
	var as []acl
	for _, in := range strings.Split(e.get(config.EnvName("INPUT_TOPICS")), ",") {
		as = append(as, acl{"Read", "topic", strings.TrimSpace(in), false})
	}
	as = append(as, acl{"Read", "group", group, false},
		acl{"Write", "topic", e.get(config.EnvName("OUTPUT_TOPIC")), false},
		acl{"Write", "transactional-id", group + "-", true})
	if e.get(config.EnvName("ON_ERROR")) == "dlq" {
		as = append(as, acl{"Write", "topic", e.get(config.EnvName("DLQ_TOPIC")), false})
	}
	// The prefix covers every pod's transactional ID.
	for _, pod := range []string{"processor-0", "processor-1", "processor-9"} {
		if id := podEnvOf(t, objs, sts, c, pod).get(config.EnvName("TRANSACTIONAL_ID")); !strings.HasPrefix(id, group+"-") {
			t.Errorf("%s: pod %s's transactional ID %q is outside the ACL prefix %q", sts, pod, id, group+"-")
		}
	}
	return user, as, e
}

// kafkaACLs parses the kafka-acls.sh lines of a document's sh blocks: the
// acl() helper with --allow-principal, then acl --operation ... lines.
func kafkaACLs(t *testing.T, file string) (principal string, as []acl) {
	t.Helper()
	inSh := false
	sc := bufio.NewScanner(strings.NewReader(readFile(t, file)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```"):
			inSh = line == "```sh"
			continue
		case !inSh:
			continue
		case strings.HasPrefix(line, "acl()"):
			if m := regexp.MustCompile(`--allow-principal\s+User:(\S+)`).FindStringSubmatch(line); m != nil {
				principal = m[1]
			}
			continue
		case !strings.HasPrefix(line, "acl "):
			continue
		}
		f := strings.Fields(line)[1:]
		var op string
		var res [][2]string
		prefixed := false
		for i := 0; i+1 < len(f); i += 2 {
			switch f[i] {
			case "--operation":
				op = f[i+1]
			case "--topic":
				res = append(res, [2]string{"topic", f[i+1]})
			case "--group":
				res = append(res, [2]string{"group", f[i+1]})
			case "--transactional-id":
				res = append(res, [2]string{"transactional-id", f[i+1]})
			case "--resource-pattern-type":
				prefixed = f[i+1] == "prefixed"
			default:
				t.Errorf("%s: %q: unknown option %s", file, line, f[i])
			}
		}
		for _, r := range res {
			as = append(as, acl{op, r[0], r[1], prefixed})
		}
	}
	return principal, as
}

// secretACLs parses the list of ACLs in the comment beside the Secret's
// generator in kustomization.yaml, and the username its kubectl example
// creates.
func secretACLs(t *testing.T) (user string, as []acl, text string) {
	t.Helper()
	text = readFile(t, kustomizationFile)
	re := regexp.MustCompile(`(?m)^#\s+(Read|Write)\s+(topic|group|transactional-id)\s+(\S+)(\s+\(prefixed\))?\s*$`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		as = append(as, acl{m[1], m[2], m[3], m[4] != ""})
	}
	if m := regexp.MustCompile(`--from-literal=username=(\S+)`).FindStringSubmatch(text); m != nil {
		user = m[1]
	}
	return user, as, text
}

// TestK8sACLsAgree: the ACLs docs/security.md and docs/deploy.md tell
// users to grant, and those listed beside the Secret, are exactly the
// ones the manifests need, for the Secret's user.
func TestK8sACLsAgree(t *testing.T) {
	user, want, _ := wantACLs(t)
	wantS := aclStrings(want)
	for _, f := range []string{securityFile, deployDoc} {
		p, got := kafkaACLs(t, f)
		if len(got) == 0 {
			t.Errorf("%s: no kafka-acls.sh lines (acl --operation ...) found", f)
			continue
		}
		if p != user {
			t.Errorf("%s: the ACLs are for User:%s, but the Secret's username is %q", f, p, user)
		}
		if g := aclStrings(got); !slices.Equal(g, wantS) {
			t.Errorf("%s: the ACLs are\n  %s\nbut the manifests need\n  %s", f, strings.Join(g, "\n  "), strings.Join(wantS, "\n  "))
		}
	}
	cuser, got, text := secretACLs(t)
	if g := aclStrings(got); !slices.Equal(g, wantS) {
		t.Errorf("%s: the comment beside the Secret lists\n  %s\nbut the manifests need\n  %s", kustomizationFile, strings.Join(g, "\n  "), strings.Join(wantS, "\n  "))
	}
	if cuser != user {
		t.Errorf("%s: the comment's kubectl create secret uses username %q, the Secret has %q", kustomizationFile, cuser, user)
	}
	objs := loadK8s(t)
	sts, _, c := theStatefulSet(t, objs)
	if id := podEnvOf(t, objs, sts, c, "processor-0").get(config.EnvName("TRANSACTIONAL_ID")); !strings.Contains(text, id) {
		t.Errorf("%s: the comment does not name processor-0's transactional ID %q", kustomizationFile, id)
	}
}

func TestK8sServiceAccount(t *testing.T) {
	objs := loadK8s(t)
	sts, spec, _ := theStatefulSet(t, objs)
	pod := spec.Template.Spec
	if pod.ServiceAccountName == "" || pod.ServiceAccountName == "default" {
		t.Fatalf("%s: serviceAccountName %q, want a dedicated ServiceAccount", sts, pod.ServiceAccountName)
	}
	sa, ok := findObject(objs, "ServiceAccount", pod.ServiceAccountName)
	if !ok {
		t.Fatalf("%s: ServiceAccount %s is not in %s", sts, pod.ServiceAccountName, k8sDir)
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken is not false", sa)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken is not false", sts)
	}
}

type npPort struct {
	Protocol string    `yaml:"protocol"`
	Port     yaml.Node `yaml:"port"`
	EndPort  *int      `yaml:"endPort"`
}

type networkPolicySpec struct {
	PodSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"podSelector"`
	PolicyTypes []string `yaml:"policyTypes"`
	Ingress     []struct {
		Ports []npPort `yaml:"ports"`
		From  []any    `yaml:"from"`
	} `yaml:"ingress"`
	Egress []struct {
		Ports []npPort `yaml:"ports"`
		To    []any    `yaml:"to"`
	} `yaml:"egress"`
}

// allows says whether ports (a rule's; none means all) let protocol/port
// through; a named port is resolved against the container's.
func allows(t *testing.T, ports []npPort, protocol string, port int, c k8sContainer) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if cmpOr(p.Protocol, "TCP") != protocol {
			continue
		}
		if p.Port.Value == "" {
			return true
		}
		n := probePort(t, p.Port, c)
		if n == port || (p.EndPort != nil && n <= port && port <= *p.EndPort) {
			return true
		}
	}
	return false
}

func TestK8sNetworkPolicy(t *testing.T) {
	objs := loadK8s(t)
	sts, spec, c := theStatefulSet(t, objs)
	e := podEnv(t, objs, sts, c)
	var np networkPolicySpec
	pol := theOnly(t, objs, "NetworkPolicy", &np)
	if !labelsMatch(np.PodSelector.MatchLabels, spec.Template.Metadata.Labels) {
		t.Errorf("%s: podSelector %v does not select the processor's pods", pol, np.PodSelector.MatchLabels)
	}
	for _, pt := range []string{"Ingress", "Egress"} {
		if !slices.Contains(np.PolicyTypes, pt) {
			t.Errorf("%s: policyTypes %v lack %s", pol, np.PolicyTypes, pt)
		}
	}
	egress := func(protocol string, port int) bool {
		for _, r := range np.Egress {
			if allows(t, r.Ports, protocol, port, c) {
				return true
			}
		}
		return false
	}
	for _, proto := range []string{"UDP", "TCP"} {
		if !egress(proto, 53) {
			t.Errorf("%s: no egress to DNS on %s 53", pol, proto)
		}
	}
	brokers := e.get(config.EnvName("BROKERS"))
	for _, b := range strings.Split(brokers, ",") {
		_, port, err := net.SplitHostPort(strings.TrimSpace(b))
		if err != nil {
			t.Errorf("PROCESSOR_BROKERS %q: %v", brokers, err)
			continue
		}
		var n int
		fmt.Sscan(port, &n)
		if !egress("TCP", n) {
			t.Errorf("%s: no egress to the brokers' port %d (PROCESSOR_BROKERS=%s)", pol, n, brokers)
		}
	}
	if e.get(config.EnvName("SINK")) == "postgres" {
		t.Errorf("%s: PROCESSOR_SINK=postgres: check that the NetworkPolicy lets the pods reach PostgreSQL, then teach this test its port", pol)
	}
	in := false
	for _, r := range np.Ingress {
		in = in || allows(t, r.Ports, "TCP", httpPort(t, e), c)
	}
	if !in {
		t.Errorf("%s: no ingress to the http port %d (metrics, probes)", pol, httpPort(t, e))
	}
}

// TestK8sConfigChangesRollPods: the ConfigMap and the Secret the pods
// read come from kustomize's generators, whose hashed names change with
// their contents, so that a change rolls the StatefulSet.
func TestK8sConfigChangesRollPods(t *testing.T) {
	k := readKustomization(t, k8sDir)
	objs := loadK8s(t)
	sts, spec, c := theStatefulSet(t, objs)
	hashed := map[string]bool{}
	for _, g := range append(slices.Clone(k.ConfigMapGenerator), k.SecretGenerator...) {
		hashed[g.Name] = !g.Options.DisableNameSuffixHash
	}
	refs := map[string]bool{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			refs[ef.ConfigMapRef.Name] = true
		}
		if ef.SecretRef != nil {
			refs[ef.SecretRef.Name] = true
		}
	}
	for _, v := range c.Env {
		if v.ValueFrom != nil && v.ValueFrom.ConfigMapKeyRef != nil {
			refs[v.ValueFrom.ConfigMapKeyRef.Name] = true
		}
		if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
			refs[v.ValueFrom.SecretKeyRef.Name] = true
		}
	}
	for _, v := range spec.Template.Spec.Volumes {
		if v.Secret != nil {
			refs[v.Secret.SecretName] = true
		}
	}
	if len(refs) == 0 {
		t.Fatalf("%s: refers to no ConfigMap or Secret", sts)
	}
	for name := range refs {
		if !hashed[name] {
			t.Errorf("%s: %s is not made by a configMapGenerator or secretGenerator with a hashed name in %s, so changing it would not roll the pods", sts, name, kustomizationFile)
		}
	}
	for _, o := range objs {
		if (o.Kind == "ConfigMap" || o.Kind == "Secret") && !strings.HasSuffix(o.file, "Generator") {
			t.Errorf("%s: a static %s: make it with a generator", o, o.Kind)
		}
	}
}

// TestK8sImagesPinned: every image is a version (or a digest), never
// latest nor untagged, in the base and in every component.
func TestK8sImagesPinned(t *testing.T) {
	dirs := []string{k8sDir}
	comps, _ := filepath.Glob(filepath.Join(k8sDir, "components", "*", "kustomization.yaml"))
	for _, f := range comps {
		dirs = append(dirs, filepath.Dir(f))
	}
	if len(comps) < 2 {
		t.Errorf("%s: components %v, want monitoring and keda", k8sDir, comps)
	}
	// The manifests run a released image: the latest release CHANGELOG.md
	// names (VERSION is the release being worked towards, not yet built).
	version := latestRelease(t)
	for _, dir := range dirs {
		k := readKustomization(t, dir)
		set := map[string]string{}
		for _, img := range k.Images {
			tag := img.NewTag
			if img.Digest == "" && (tag == "" || tag == "latest") {
				t.Errorf("%s/kustomization.yaml: image %s: newTag %q, want a version (or a digest)", dir, img.Name, tag)
			}
			if version != "" && img.Digest == "" && tag != version {
				t.Errorf("%s/kustomization.yaml: image %s: newTag %q, but the latest release in CHANGELOG.md is %s", dir, img.Name, tag, version)
			}
			set[img.Name] = tag + img.Digest
		}
		for _, o := range loadKustomize(t, dir) {
			if o.Kind != "StatefulSet" {
				continue
			}
			var s statefulSetSpec
			if err := o.Spec.Decode(&s); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			for _, c := range s.Template.Spec.Containers {
				if _, ok := set[c.Image]; ok {
					continue
				}
				if _, tag, digest := parseImageRef(c.Image); digest == "" && (tag == "" || tag == "latest") {
					t.Errorf("%s: container %s: image %q is untagged or latest, and %s/kustomization.yaml's images do not set it", o, c.Name, c.Image, dir)
				}
			}
		}
	}
	for _, c := range []struct{ in, name, tag, digest string }{
		{"ghcr.io/x/p:v1", "ghcr.io/x/p", "v1", ""},
		{"localhost:5000/p", "localhost:5000/p", "", ""},
		{"p@sha256:ab", "p", "", "sha256:ab"},
	} {
		if n, tg, d := parseImageRef(c.in); n != c.name || tg != c.tag || d != c.digest {
			t.Errorf("parseImageRef(%q) = %q %q %q", c.in, n, tg, d)
		}
	}
}

// kubectlKustomize renders dir with kustomize (render_test.go's
// kustomizeBuild: skipped without it, except under CI).
func kubectlKustomize(t *testing.T, dir string) []k8sObject {
	t.Helper()
	return kustomizeBuild(t, dir)
}

// TestK8sKustomizeRenders renders the base, and an overlay with both
// components, with kustomize.
func TestK8sKustomizeRenders(t *testing.T) {
	objs := kubectlKustomize(t, k8sDir)
	sts, spec, c := theStatefulSet(t, objs)
	if _, tag, _ := parseImageRef(c.Image); tag == "" || tag == "latest" {
		t.Errorf("%s: rendered image %q", sts, c.Image)
	}
	// The generated names are hashed, and the StatefulSet's references
	// follow them.
	for _, v := range spec.Template.Spec.Volumes {
		if v.Secret != nil {
			if _, ok := findObject(objs, "Secret", v.Secret.SecretName); !ok || v.Secret.SecretName == "processor-kafka" {
				t.Errorf("%s: volume %s: Secret %q, want the generated processor-kafka-<hash>", sts, v.Name, v.Secret.SecretName)
			}
		}
	}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			if _, ok := findObject(objs, "ConfigMap", ef.ConfigMapRef.Name); !ok || ef.ConfigMapRef.Name == "processor-config" {
				t.Errorf("%s: envFrom ConfigMap %q, want the generated processor-config-<hash>", sts, ef.ConfigMapRef.Name)
			}
		}
	}
	e := podEnv(t, objs, sts, c)
	if id, group := e.get(config.EnvName("TRANSACTIONAL_ID")), e.get(config.EnvName("GROUP")); id != group+"-"+podNameStandIn {
		t.Errorf("%s: rendered PROCESSOR_TRANSACTIONAL_ID %q, want %q", sts, id, group+"-"+podNameStandIn)
	}

	// An overlay with both components, as docs/deploy.md writes it.
	abs, err := filepath.Abs(k8sDir)
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	rel, err := filepath.Rel(overlay, abs)
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: orders\nresources:\n  - %s\ncomponents:\n  - %s/components/monitoring\n  - %s/components/keda\n", rel, rel, rel)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	all := kubectlKustomize(t, overlay)
	for _, kind := range []string{"StatefulSet", "PodMonitor", "PrometheusRule", "ScaledObject", "NetworkPolicy", "ServiceAccount"} {
		if len(findObjects(all, kind)) != 1 {
			t.Errorf("overlay with both components: %d %s, want 1", len(findObjects(all, kind)), kind)
		}
	}
	if sts := findObjects(all, "StatefulSet"); len(sts) == 1 {
		var s statefulSetSpec
		if err := sts[0].Spec.Decode(&s); err != nil || s.Replicas != nil {
			t.Errorf("overlay with the keda component: the StatefulSet keeps replicas %s (%v)", intp(s.Replicas), err)
		}
	}
	if svc, ok := findObject(all, "Service", "processor-metrics"); !ok || svc.Metadata.Annotations["prometheus.io/scrape"] != "false" {
		t.Errorf("overlay with the monitoring component: processor-metrics still has prometheus.io/scrape %q", svc.Metadata.Annotations["prometheus.io/scrape"])
	}
}

// latestRelease is the version of CHANGELOG.md's first release heading
// ("## [0.4.0] - 2026-12-02"), with a v, as images are tagged.
func latestRelease(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$`).FindStringSubmatch(readFile(t, changelogFile))
	if m == nil {
		t.Fatal("CHANGELOG.md names no release (## [x.y.z] - yyyy-mm-dd)")
	}
	return "v" + m[1]
}
