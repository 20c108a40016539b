package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/streamproc/processor/config"
)

const (
	k8sDir            = "k8s"
	kustomizationFile = "k8s/kustomization.yaml"
	// The stand-in value of a variable set from the pod's name.
	podNameStandIn = "processor-0"
)

// k8sObject is one Kubernetes manifest, with its spec left for the kind's
// own type.
type k8sObject struct {
	file       string
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       yaml.Node         `yaml:"spec"`
	// A ServiceAccount's.
	AutomountServiceAccountToken *bool `yaml:"automountServiceAccountToken"`
}

func (o k8sObject) String() string {
	return fmt.Sprintf("%s %s/%s", o.file, strings.ToLower(o.Kind), o.Metadata.Name)
}

type httpGetProbe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			ConfigMapKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"configMapKeyRef"`
			ResourceFieldRef *resourceFieldRef `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	StartupProbe    *httpGetProbe `yaml:"startupProbe"`
	LivenessProbe   *httpGetProbe `yaml:"livenessProbe"`
	ReadinessProbe  *httpGetProbe `yaml:"readinessProbe"`
	SecurityContext struct {
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		RunAsUser                *int  `yaml:"runAsUser"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type resourceFieldRef struct {
	ContainerName string `yaml:"containerName"`
	Resource      string `yaml:"resource"`
	Divisor       string `yaml:"divisor"`
}

type statefulSetSpec struct {
	ServiceName string `yaml:"serviceName"`
	Replicas    *int   `yaml:"replicas"`
	Selector    struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			ServiceAccountName            string `yaml:"serviceAccountName"`
			AutomountServiceAccountToken  *bool  `yaml:"automountServiceAccountToken"`
			TerminationGracePeriodSeconds *int   `yaml:"terminationGracePeriodSeconds"`
			EnableServiceLinks            *bool  `yaml:"enableServiceLinks"`
			SecurityContext               struct {
				RunAsNonRoot *bool `yaml:"runAsNonRoot"`
				RunAsUser    *int  `yaml:"runAsUser"`
			} `yaml:"securityContext"`
			Containers []k8sContainer `yaml:"containers"`
			Volumes    []struct {
				Name   string `yaml:"name"`
				Secret *struct {
					SecretName string `yaml:"secretName"`
					Items      []struct {
						Key  string `yaml:"key"`
						Path string `yaml:"path"`
					} `yaml:"items"`
				} `yaml:"secret"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

type serviceSpec struct {
	ClusterIP string            `yaml:"clusterIP"`
	Selector  map[string]string `yaml:"selector"`
	Ports     []struct {
		Name       string    `yaml:"name"`
		Port       int       `yaml:"port"`
		TargetPort yaml.Node `yaml:"targetPort"`
	} `yaml:"ports"`
}

type pdbSpec struct {
	MaxUnavailable yaml.Node `yaml:"maxUnavailable"`
	MinAvailable   yaml.Node `yaml:"minAvailable"`
	Selector       struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
}

// kustomization is what the tests read of a kustomization.yaml.
type kustomization struct {
	Kind               string      `yaml:"kind"`
	Resources          []string    `yaml:"resources"`
	Components         []string    `yaml:"components"`
	ConfigMapGenerator []generator `yaml:"configMapGenerator"`
	SecretGenerator    []generator `yaml:"secretGenerator"`
	Images             []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
		Digest  string `yaml:"digest"`
	} `yaml:"images"`
}

// generator is one entry of configMapGenerator or secretGenerator.
type generator struct {
	Name     string   `yaml:"name"`
	Type     string   `yaml:"type"`
	Envs     []string `yaml:"envs"`
	Files    []string `yaml:"files"`
	Literals []string `yaml:"literals"`
	Options  struct {
		Labels                map[string]string `yaml:"labels"`
		DisableNameSuffixHash bool              `yaml:"disableNameSuffixHash"`
	} `yaml:"options"`
}

func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	f := filepath.Join(dir, "kustomization.yaml")
	var k kustomization
	if err := yaml.Unmarshal([]byte(readFile(t, f)), &k); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return k
}

// loadK8s returns the objects of the base, deploy/k8s: its resources and
// what its generators make, under their names before kustomize adds the
// hash (kustomize rewrites the references to them the same way).
func loadK8s(t *testing.T) []k8sObject {
	t.Helper()
	objs := loadKustomize(t, k8sDir)
	if len(objs) == 0 {
		t.Fatalf("no manifests in %s", k8sDir)
	}
	return objs
}

// loadKustomize reads the kustomization in dir: every document of each
// resource file (a directory is read as a kustomization of its own), and
// the ConfigMaps and Secrets of its generators. Components and patches are
// not applied.
func loadKustomize(t *testing.T, dir string) []k8sObject {
	t.Helper()
	k := readKustomization(t, dir)
	var objs []k8sObject
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			objs = append(objs, loadKustomize(t, p)...)
			continue
		}
		objs = append(objs, loadManifests(t, p)...)
	}
	kf := filepath.Join(dir, "kustomization.yaml")
	for _, g := range k.ConfigMapGenerator {
		o := generated(t, dir, g)
		o.file, o.Kind, o.APIVersion = kf+" configMapGenerator", "ConfigMap", "v1"
		objs = append(objs, o)
	}
	for _, g := range k.SecretGenerator {
		o := generated(t, dir, g)
		o.file, o.Kind, o.APIVersion = kf+" secretGenerator", "Secret", "v1"
		o.StringData, o.Data = o.Data, nil
		objs = append(objs, o)
	}
	return objs
}

// generated makes the data of a generator's object as kustomize does:
// env files (KEY=VALUE lines; blank lines and # comments skipped), files
// (key=path, or the file's name as key) and literals.
func generated(t *testing.T, dir string, g generator) k8sObject {
	t.Helper()
	var o k8sObject
	o.Metadata.Name = g.Name
	o.Metadata.Labels = g.Options.Labels
	o.Data = map[string]string{}
	add := func(where, k, v string) {
		if _, dup := o.Data[k]; dup {
			t.Errorf("%s: key %s twice in generator %s", where, k, g.Name)
		}
		o.Data[k] = v
	}
	for _, env := range g.Envs {
		f := filepath.Join(dir, env)
		for i, line := range strings.Split(readFile(t, f), "\n") {
			line = strings.TrimLeft(line, " \t")
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				// kustomize would take the value from its own environment.
				t.Errorf("%s:%d: %q has no =", f, i+1, line)
				continue
			}
			if strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "'") {
				t.Errorf("%s:%d: %s: kustomize keeps the quotes as part of the value", f, i+1, k)
			}
			add(f, k, v)
		}
	}
	for _, spec := range g.Files {
		k, p, ok := strings.Cut(spec, "=")
		if !ok {
			k, p = filepath.Base(spec), spec
		}
		add(filepath.Join(dir, "kustomization.yaml"), k, readFile(t, filepath.Join(dir, p)))
	}
	for _, l := range g.Literals {
		k, v, _ := strings.Cut(l, "=")
		add(filepath.Join(dir, "kustomization.yaml"), k, v)
	}
	return o
}

// loadManifests parses every document of a manifest file.
func loadManifests(t *testing.T, f string) []k8sObject {
	t.Helper()
	var objs []k8sObject
	dec := yaml.NewDecoder(bytes.NewReader([]byte(readFile(t, f))))
	for i := 1; ; i++ {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", f, i, err)
		}
		if o.Kind == "" && o.APIVersion == "" {
			continue // an empty document
		}
		o.file = f
		if o.Kind == "" || o.APIVersion == "" || o.Metadata.Name == "" {
			t.Errorf("%s: document %d lacks kind, apiVersion or metadata.name", f, i)
		}
		objs = append(objs, o)
	}
	return objs
}

func findObjects(objs []k8sObject, kind string) []k8sObject {
	var out []k8sObject
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func findObject(objs []k8sObject, kind, name string) (k8sObject, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return k8sObject{}, false
}

// theStatefulSet returns the one StatefulSet and its processor container.
func theStatefulSet(t *testing.T, objs []k8sObject) (k8sObject, statefulSetSpec, k8sContainer) {
	t.Helper()
	var spec statefulSetSpec
	sts := theOnly(t, objs, "StatefulSet", &spec)
	cs := spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers, want the processor alone", sts, len(cs))
	}
	return sts, spec, cs[0]
}

// theOnly returns the one object of kind in objs, its spec decoded into
// spec.
func theOnly(t *testing.T, objs []k8sObject, kind string, spec any) k8sObject {
	t.Helper()
	found := findObjects(objs, kind)
	if len(found) != 1 {
		t.Fatalf("%s: %d %ss, want 1", k8sDir, len(found), kind)
	}
	if err := found[0].Spec.Decode(spec); err != nil {
		t.Fatalf("%s: %v", found[0], err)
	}
	return found[0]
}

// podEnv returns the processor container's environment for the pod
// podNameStandIn.
func podEnv(t *testing.T, objs []k8sObject, sts k8sObject, c k8sContainer) envSet {
	t.Helper()
	return podEnvOf(t, objs, sts, c, podNameStandIn)
}

// podEnvOf returns the processor container's environment in the pod named
// pod: its ConfigMaps (envFrom), then its env, which wins. Values from
// secrets are stand-ins. $(VAR) in a value is expanded as the API defines
// it: from the variables defined earlier in env ($$ is a $); a reference
// to anything else stays as written.
func podEnvOf(t *testing.T, objs []k8sObject, sts k8sObject, c k8sContainer, pod string) envSet {
	t.Helper()
	e := newEnvSet(sts.String())
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, ok := findObject(objs, "ConfigMap", ef.ConfigMapRef.Name)
			if !ok {
				t.Errorf("%s: envFrom ConfigMap %s is not in %s", sts, ef.ConfigMapRef.Name, k8sDir)
				continue
			}
			for k, v := range cm.Data {
				e.set(k, v, cm.String())
			}
		case ef.SecretRef != nil:
			sec, ok := findObject(objs, "Secret", ef.SecretRef.Name)
			if !ok {
				t.Errorf("%s: envFrom Secret %s is not in %s", sts, ef.SecretRef.Name, k8sDir)
				continue
			}
			for k := range secretKeys(sec) {
				e.set(k, "secret", sec.String())
			}
		}
	}
	defined := map[string]string{} // env entries so far, for $(VAR)
	for _, v := range c.Env {
		value := expandEnv(v.Value, defined)
		switch {
		case v.ValueFrom == nil:
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.name":
			value = pod
		case v.ValueFrom.SecretKeyRef != nil:
			ref := v.ValueFrom.SecretKeyRef
			sec, ok := findObject(objs, "Secret", ref.Name)
			if !ok || !secretKeys(sec)[ref.Key] {
				t.Errorf("%s: %s comes from key %s of Secret %s, which is not in %s", sts, v.Name, ref.Key, ref.Name, k8sDir)
			}
			value = "secret"
		case v.ValueFrom.ConfigMapKeyRef != nil:
			ref := v.ValueFrom.ConfigMapKeyRef
			cm, ok := findObject(objs, "ConfigMap", ref.Name)
			if _, has := cm.Data[ref.Key]; !ok || !has {
				t.Errorf("%s: %s comes from key %s of ConfigMap %s, which is not in %s", sts, v.Name, ref.Key, ref.Name, k8sDir)
			}
			value = cm.Data[ref.Key]
		case v.ValueFrom.ResourceFieldRef != nil:
			value = resourceField(t, sts, c, v.Name, *v.ValueFrom.ResourceFieldRef)
		default:
			value = "from-the-pod"
		}
		defined[v.Name] = value
		e.set(v.Name, value, sts.String()+" env")
	}
	return e
}

// expandEnv expands $(NAME) from defined as Kubernetes does; $$ is $.
func expandEnv(s string, defined map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+end]
			if v, ok := defined[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// resourceField resolves a resourceFieldRef of c's env variable name the
// way the kubelet does: the container's request or limit divided by the
// divisor (default 1), rounded up, as a plain integer.
func resourceField(t *testing.T, sts k8sObject, c k8sContainer, name string, ref resourceFieldRef) string {
	t.Helper()
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		t.Errorf("%s: %s: resourceFieldRef of container %s, want its own (%s)", sts, name, ref.ContainerName, c.Name)
	}
	kind, res, _ := strings.Cut(ref.Resource, ".")
	var q string
	switch kind {
	case "requests":
		q = c.Resources.Requests[res]
	case "limits":
		q = c.Resources.Limits[res]
	}
	if res != "memory" || q == "" {
		t.Errorf("%s: %s: resourceFieldRef %q: want requests.memory or limits.memory, set on the container", sts, name, ref.Resource)
		return "from-the-pod"
	}
	n, err := parseBytes(q)
	if err != nil {
		t.Errorf("%s: %s: %s %q: %v", sts, name, ref.Resource, q, err)
	}
	d := int64(1)
	if ref.Divisor != "" {
		if d, err = parseBytes(ref.Divisor); err != nil || d <= 0 {
			t.Errorf("%s: %s: divisor %q: %v", sts, name, ref.Divisor, err)
			d = 1
		}
	}
	return strconv.FormatInt((n+d-1)/d, 10)
}

// intp shows an optional number.
func intp(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

func secretKeys(sec k8sObject) map[string]bool {
	keys := map[string]bool{}
	for k := range sec.Data {
		keys[k] = true
	}
	for k := range sec.StringData {
		keys[k] = true
	}
	return keys
}

// probePort resolves a probe's or service's port (a number or the name of
// a container port) to a number.
func probePort(t *testing.T, n yaml.Node, c k8sContainer) int {
	t.Helper()
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort
		}
	}
	t.Errorf("port %q is no port of container %s", n.Value, c.Name)
	return 0
}

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestK8sKustomization(t *testing.T) {
	k := readKustomization(t, k8sDir)
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	var want []string
	for _, f := range files {
		if f != kustomizationFile {
			want = append(want, filepath.Base(f))
		}
	}
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s lists %v, want every manifest beside it: %v", kustomizationFile, got, want)
	}
	objs := loadK8s(t)
	sts, _, c := theStatefulSet(t, objs)
	named := false
	for _, img := range k.Images {
		named = named || img.Name == c.Image
	}
	if !named {
		t.Errorf("%s: image %q is not set by %s's images", sts, c.Image, kustomizationFile)
	}
}

func TestK8sProcessorVariablesExist(t *testing.T) {
	objs := loadK8s(t)
	sts, _, c := theStatefulSet(t, objs)
	e := podEnv(t, objs, sts, c)
	checkKnownVars(t, []envSet{e})
	checkConfigLoads(t, []envSet{e})
}

func TestK8sStatefulSet(t *testing.T) {
	objs := loadK8s(t)
	sts, spec, c := theStatefulSet(t, objs)
	e := podEnv(t, objs, sts, c)
	pod := spec.Template.Spec

	if spec.Replicas == nil || *spec.Replicas != 2 {
		t.Errorf("%s: replicas %s, want 2", sts, intp(spec.Replicas))
	}
	if !labelsMatch(spec.Selector.MatchLabels, spec.Template.Metadata.Labels) {
		t.Errorf("%s: selector %v does not select its pods' labels %v", sts, spec.Selector.MatchLabels, spec.Template.Metadata.Labels)
	}

	// One static member ID per pod, stable across its restarts: the pod's
	// name. One transactional ID per pod, stable across its restarts and
	// unique in the Kafka cluster: <group>-<pod name>.
	for _, name := range []string{"TRANSACTIONAL_ID", "INSTANCE_ID"} {
		name = config.EnvName(name)
		ok := false
		for _, v := range c.Env {
			if v.Name == name && v.ValueFrom != nil && v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.name" {
				ok = true
			}
		}
		if !ok && name == config.EnvName("INSTANCE_ID") {
			t.Errorf("%s: %s must come from the pod's name (valueFrom.fieldRef metadata.name)", sts, name)
		}
		if from := e.from[name]; from != sts.String()+" env" {
			t.Errorf("%s: %s is also set by %s, and must not be the same for every pod", sts, name, from)
		}
	}
	group := e.get(config.EnvName("GROUP"))
	for _, pod := range []string{"processor-0", "processor-1"} {
		id := podEnvOf(t, objs, sts, c, pod).get(config.EnvName("TRANSACTIONAL_ID"))
		if want := group + "-" + pod; id != want {
			t.Errorf("%s: in pod %s, PROCESSOR_TRANSACTIONAL_ID is %q, want %q (<PROCESSOR_GROUP>-<pod name>; define PROCESSOR_GROUP and POD_NAME in env before it: the API expands $(VAR) from earlier env entries only)",
				sts, pod, id, want)
		}
	}

	// The entrypoint is the image's: /processor.
	if len(c.Command) > 0 && !slices.Equal(c.Command, []string{"/processor"}) {
		t.Errorf("%s: command %q overrides the image's /processor", sts, c.Command)
	}

	// Ports and probes: what the binary serves, where it listens.
	port := httpPort(t, e)
	httpNamed := false
	for _, p := range c.Ports {
		if p.Name == "http" {
			httpNamed = true
			if p.ContainerPort != port {
				t.Errorf("%s: container port http is %d, but PROCESSOR_HTTP_ADDR listens on %d", sts, p.ContainerPort, port)
			}
		}
	}
	if !httpNamed {
		t.Errorf("%s: no container port named http", sts)
	}
	paths := servedPaths(t)
	for _, p := range []struct {
		kind  string
		probe *httpGetProbe
		want  string
	}{
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
		{"startupProbe", c.StartupProbe, "/healthz"},
	} {
		if p.probe == nil {
			if p.kind != "startupProbe" {
				t.Errorf("%s: no %s", sts, p.kind)
			}
			continue
		}
		if p.probe.HTTPGet == nil {
			t.Errorf("%s: %s is not an httpGet probe", sts, p.kind)
			continue
		}
		if got := p.probe.HTTPGet.Path; got != p.want || !paths[got] {
			t.Errorf("%s: %s path %q, want %s", sts, p.kind, got, p.want)
		}
		if got := probePort(t, p.probe.HTTPGet.Port, c); got != port {
			t.Errorf("%s: %s port %s is %d, want %d (PROCESSOR_HTTP_ADDR)", sts, p.kind, p.probe.HTTPGet.Port.Value, got, port)
		}
	}

	// A stop may take as long as a clean stop can.
	bound := cleanStopBound(transactionTimeout(t, e))
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= bound {
		t.Errorf("%s: terminationGracePeriodSeconds %s, want more than %s, the longest clean stop with PROCESSOR_TRANSACTION_TIMEOUT=%s",
			sts, intp(g), bound, e.get(config.EnvName("TRANSACTION_TIMEOUT")))
	}

	// Services named processor* would inject PROCESSOR_*_PORT variables.
	for _, svc := range findObjects(objs, "Service") {
		if strings.HasPrefix(strings.ToUpper(strings.ReplaceAll(svc.Metadata.Name, "-", "_")), config.Prefix) &&
			(pod.EnableServiceLinks == nil || *pod.EnableServiceLinks) {
			t.Errorf("%s: enableServiceLinks must be false: %s would inject %s_* variables, unknown to the processor", sts, svc, strings.ToUpper(strings.ReplaceAll(svc.Metadata.Name, "-", "_")))
		}
	}

	// Security.
	sc := c.SecurityContext
	nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot)
	if !nonRoot {
		t.Errorf("%s: runAsNonRoot is not true", sts)
	}
	for _, uid := range []*int{sc.RunAsUser, pod.SecurityContext.RunAsUser} {
		if uid != nil && *uid == 0 {
			t.Errorf("%s: runs as root (runAsUser 0)", sts)
		}
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem is not true", sts)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation is not false", sts)
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("%s: capabilities.drop %v does not drop ALL", sts, sc.Capabilities.Drop)
	}

	// Resources: requested, memory limited, GOMEMLIMIT below the limit.
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" {
			t.Errorf("%s: no %s request", sts, r)
		}
	}
	limit, err := parseBytes(c.Resources.Limits["memory"])
	if err != nil || limit <= 0 {
		t.Errorf("%s: memory limit %q: %v", sts, c.Resources.Limits["memory"], err)
	}
	if req, err := parseBytes(c.Resources.Requests["memory"]); err != nil || req > limit {
		t.Errorf("%s: memory request %q above the limit or unreadable (%v)", sts, c.Resources.Requests["memory"], err)
	}
	if v, ok := e.vars["GOMEMLIMIT"]; ok {
		if n, err := parseBytes(v); err != nil || n >= limit {
			t.Errorf("%s: GOMEMLIMIT=%s, want it below the memory limit %s (%v)", sts, v, c.Resources.Limits["memory"], err)
		} else if n > limit*4/5 {
			t.Errorf("%s: GOMEMLIMIT=%s leaves less than a fifth of the memory limit %s as headroom", sts, v, c.Resources.Limits["memory"])
		}
	}
	// GOMEMLIMIT follows the resources: from a resourceFieldRef in bytes
	// (the Go runtime reads a plain number as bytes), not a number to be
	// edited along with them.
	derived := false
	for _, v := range c.Env {
		if v.Name != "GOMEMLIMIT" {
			continue
		}
		var r *resourceFieldRef
		if v.ValueFrom != nil {
			r = v.ValueFrom.ResourceFieldRef
		}
		if r == nil {
			t.Errorf("%s: GOMEMLIMIT=%q: want it from valueFrom.resourceFieldRef of the container's memory", sts, v.Value)
			continue
		}
		derived = true
		if d, err := parseBytes(cmpOr(r.Divisor, "1")); err != nil || d != 1 {
			t.Errorf("%s: GOMEMLIMIT: divisor %q, want 1: the Go runtime reads a plain number as bytes", sts, r.Divisor)
		}
	}
	if !derived {
		t.Errorf("%s: no GOMEMLIMIT from the container's memory (resourceFieldRef)", sts)
	}
}

func TestK8sCredentials(t *testing.T) {
	objs := loadK8s(t)
	sts, spec, c := theStatefulSet(t, objs)
	e := podEnv(t, objs, sts, c)

	// The files the processor reads: each in a mounted Secret volume, from
	// a key the Secret has.
	files := map[string]string{} // path in the container -> secret/key
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			sec, ok := findObject(objs, "Secret", v.Secret.SecretName)
			if !ok {
				t.Errorf("%s: volume %s mounts Secret %s, which is not in %s", sts, v.Name, v.Secret.SecretName, k8sDir)
				continue
			}
			for _, it := range v.Secret.Items {
				if !secretKeys(sec)[it.Key] {
					t.Errorf("%s: volume %s wants key %s, which %s does not have", sts, v.Name, it.Key, sec)
				}
				files[path.Join(m.MountPath, it.Path)] = sec.Metadata.Name + "/" + it.Key
			}
			if len(v.Secret.Items) == 0 {
				for k := range secretKeys(sec) {
					files[path.Join(m.MountPath, k)] = sec.Metadata.Name + "/" + k
				}
			}
		}
	}
	fileVars := []string{"SASL_PASSWORD_FILE", "TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE"}
	for _, v := range fileVars {
		name := config.EnvName(v)
		p, ok := e.vars[name]
		if !ok {
			continue
		}
		if _, mounted := files[p]; !mounted {
			t.Errorf("%s: %s=%s is no file of a mounted Secret (mounted: %v)", sts, name, p, files)
		}
	}
	for _, v := range []string{"SASL_PASSWORD_FILE", "TLS_CA_FILE"} {
		if _, ok := e.vars[config.EnvName(v)]; !ok {
			t.Errorf("%s: %s is not set", sts, config.EnvName(v))
		}
	}
	// The password only as a file, never in an environment variable.
	if _, ok := e.vars[config.EnvName("SASL_PASSWORD")]; ok {
		t.Errorf("%s: PROCESSOR_SASL_PASSWORD is set; use PROCESSOR_SASL_PASSWORD_FILE", sts)
	}
	if m := e.vars[config.EnvName("SASL_MECHANISM")]; !slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, m) {
		t.Errorf("%s: PROCESSOR_SASL_MECHANISM=%q, want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", sts, m)
	}
	if e.vars[config.EnvName("SASL_USERNAME")] == "" {
		t.Errorf("%s: PROCESSOR_SASL_USERNAME is not set", sts)
	}
	if v := e.vars[config.EnvName("TLS_ENABLED")]; v != "true" {
		t.Errorf("%s: PROCESSOR_TLS_ENABLED=%q, want true", sts, v)
	}
}

func TestK8sServicesAndBudget(t *testing.T) {
	objs := loadK8s(t)
	sts, spec, c := theStatefulSet(t, objs)
	e := podEnv(t, objs, sts, c)
	podLabels := spec.Template.Metadata.Labels
	port := httpPort(t, e)
	paths := servedPaths(t)

	headless, scraped := false, false
	for _, svc := range findObjects(objs, "Service") {
		var s serviceSpec
		if err := svc.Spec.Decode(&s); err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
		if !labelsMatch(s.Selector, podLabels) {
			t.Errorf("%s: selector %v does not select the processor's pods %v", svc, s.Selector, podLabels)
		}
		for _, p := range s.Ports {
			if got := probePort(t, p.TargetPort, c); got != port {
				t.Errorf("%s: port %s targets %d, want %d (PROCESSOR_HTTP_ADDR)", svc, p.Name, got, port)
			}
		}
		if svc.Metadata.Name == spec.ServiceName {
			headless = s.ClusterIP == "None"
		}
		a := svc.Metadata.Annotations
		if a["prometheus.io/scrape"] == "true" {
			scraped = true
			if a["prometheus.io/port"] != strconv.Itoa(port) {
				t.Errorf("%s: prometheus.io/port %q, want %d (PROCESSOR_HTTP_ADDR)", svc, a["prometheus.io/port"], port)
			}
			if p := a["prometheus.io/path"]; p != "/metrics" || !paths[p] {
				t.Errorf("%s: prometheus.io/path %q, want /metrics", svc, p)
			}
		}
	}
	if !headless {
		t.Errorf("%s: serviceName %q is not a headless Service (clusterIP: None) in %s", sts, spec.ServiceName, k8sDir)
	}
	if !scraped {
		t.Errorf("%s: no Service with prometheus.io/scrape: \"true\"", k8sDir)
	}

	var p pdbSpec
	pdb := theOnly(t, objs, "PodDisruptionBudget", &p)
	if p.MaxUnavailable.Value != "1" || p.MinAvailable.Value != "" {
		t.Errorf("%s: maxUnavailable %q (minAvailable %q), want maxUnavailable 1", pdb, p.MaxUnavailable.Value, p.MinAvailable.Value)
	}
	if !labelsMatch(p.Selector.MatchLabels, podLabels) {
		t.Errorf("%s: selector %v does not select the processor's pods", pdb, p.Selector.MatchLabels)
	}
	if _, err := os.Stat(filepath.Join(k8sDir, "kustomization.yaml")); err != nil {
		t.Error(err)
	}
}
