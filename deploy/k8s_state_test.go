package deploy

import (
	"path"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
)

const stateVolumeDir = "k8s/components/state-volume"

// podVolumes is what the state tests read of a StatefulSet: its volumes,
// the claims it makes, and the pod's security context.
type podVolumes struct {
	Template struct {
		Spec struct {
			SecurityContext struct {
				FSGroup             *int   `yaml:"fsGroup"`
				FSGroupChangePolicy string `yaml:"fsGroupChangePolicy"`
			} `yaml:"securityContext"`
			Volumes []struct {
				Name     string `yaml:"name"`
				EmptyDir *struct {
					SizeLimit string `yaml:"sizeLimit"`
				} `yaml:"emptyDir"`
				PersistentVolumeClaim *struct {
					ClaimName string `yaml:"claimName"`
				} `yaml:"persistentVolumeClaim"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			AccessModes      []string `yaml:"accessModes"`
			StorageClassName string   `yaml:"storageClassName"`
			Resources        struct {
				Requests map[string]string `yaml:"requests"`
			} `yaml:"resources"`
		} `yaml:"spec"`
	} `yaml:"volumeClaimTemplates"`
}

// stateVolume checks that the rendered StatefulSet in objs keeps
// PROCESSOR_STATE_DIR on a writable volume mounted for it, and returns
// what backs it: "emptyDir", or "claim <size> <class>" for a
// volumeClaimTemplate.
func stateVolume(t *testing.T, objs []k8sObject) string {
	t.Helper()
	sts, _, c := theStatefulSet(t, objs)
	var pv podVolumes
	if err := sts.Spec.Decode(&pv); err != nil {
		t.Fatalf("%s: %v", sts, err)
	}
	dir := podEnv(t, objs, sts, c).get(config.EnvName("STATE_DIR"))
	if !path.IsAbs(dir) {
		t.Fatalf("%s: PROCESSOR_STATE_DIR=%q: want an absolute path on a mounted volume (the root filesystem is read-only)", sts, dir)
	}
	var mount string
	for _, m := range c.VolumeMounts {
		if dir == m.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(m.MountPath, "/")+"/") {
			if len(m.MountPath) > len(mount) {
				mount = m.Name
			}
		}
	}
	if mount == "" {
		t.Fatalf("%s: no volume is mounted at PROCESSOR_STATE_DIR=%s: the read-only root filesystem would stop a stateful chain with exit 2", sts, dir)
	}
	if c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem is not true", sts)
	}
	// The volume is writable by the non-root user: mounted read-write,
	// and its files given to the pod's group.
	if readOnlyMount(t, sts, mount) {
		t.Errorf("%s: volume %s at PROCESSOR_STATE_DIR is mounted readOnly", sts, mount)
	}
	if pv.Template.Spec.SecurityContext.FSGroup == nil {
		t.Errorf("%s: no fsGroup: a claim's root-owned directory would not be writable by user 65532", sts)
	}
	for _, v := range pv.Template.Spec.Volumes {
		if v.Name != mount {
			continue
		}
		if v.EmptyDir != nil {
			return "emptyDir"
		}
		t.Fatalf("%s: volume %s at PROCESSOR_STATE_DIR is neither an emptyDir nor a claim of the StatefulSet", sts, mount)
	}
	for _, vc := range pv.VolumeClaimTemplates {
		if vc.Metadata.Name != mount {
			continue
		}
		if len(vc.Spec.AccessModes) != 1 || vc.Spec.AccessModes[0] != "ReadWriteOnce" {
			t.Errorf("%s: claim %s: accessModes %v, want [ReadWriteOnce]: one pod's store", sts, mount, vc.Spec.AccessModes)
		}
		return "claim " + vc.Spec.Resources.Requests["storage"] + " " + vc.Spec.StorageClassName
	}
	t.Fatalf("%s: volume %s, mounted at PROCESSOR_STATE_DIR, is not defined", sts, mount)
	return ""
}

// readOnlyMount says whether the container mounts volume name readOnly.
func readOnlyMount(t *testing.T, sts k8sObject, name string) bool {
	t.Helper()
	var s struct {
		Template struct {
			Spec struct {
				Containers []struct {
					VolumeMounts []struct {
						Name     string `yaml:"name"`
						ReadOnly bool   `yaml:"readOnly"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	}
	if err := sts.Spec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Template.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == name && m.ReadOnly {
				return true
			}
		}
	}
	return false
}

// TestK8sStateVolume renders the base and an overlay with a stateful chain
// and the state-volume component, its size and class set by a patch as
// docs/deploy.md shows: the state directory is a writable volume in both,
// an emptyDir in the base and each pod's own claim of the given size with
// the component.
func TestK8sStateVolume(t *testing.T) {
	if got := stateVolume(t, loadK8s(t)); got != "emptyDir" {
		t.Errorf("%s: the state directory is on %s, want the base's emptyDir", k8sDir, got)
	}
	if k := readKustomization(t, stateVolumeDir); k.Kind != "Component" {
		t.Errorf("%s: kind %q, want Component", stateVolumeDir, k.Kind)
	}
	if got := stateVolume(t, kustomizeBuild(t, k8sDir)); got != "emptyDir" {
		t.Errorf("%s rendered: the state directory is on %s, want an emptyDir", k8sDir, got)
	}

	dir := overlay(t, []string{"state-volume"}, `configMapGenerator:
  - name: processor-config
    behavior: merge
    literals:
      - PROCESSOR_TRANSFORMS=jq,aggregate
patches:
  - target: {group: apps, kind: StatefulSet, name: processor}
    patch: |-
      - op: replace
        path: /spec/volumeClaimTemplates/0/spec/resources/requests/storage
        value: 50Gi
      - op: add
        path: /spec/volumeClaimTemplates/0/spec/storageClassName
        value: fast-ssd
`)
	objs := kustomizeBuild(t, dir)
	sts, _, c := theStatefulSet(t, objs)
	if tr := podEnv(t, objs, sts, c).get(config.EnvName("TRANSFORMS")); tr != "jq,aggregate" {
		t.Fatalf("the overlay's PROCESSOR_TRANSFORMS is %q", tr)
	}
	if got := stateVolume(t, objs); got != "claim 50Gi fast-ssd" {
		t.Errorf("with %s and the size patch: the state directory is on %s, want claim 50Gi fast-ssd", stateVolumeDir, got)
	}
	// The component's own size, without the patch.
	if got := stateVolume(t, kustomizeBuild(t, overlay(t, []string{"state-volume"}, ""))); got != "claim 10Gi " {
		t.Errorf("with %s: the state directory is on %q, want the component's claim of 10Gi", stateVolumeDir, got)
	}
	// With the other components too.
	all := kustomizeBuild(t, overlay(t, []string{"monitoring", "keda", "state-volume"}, ""))
	if got := stateVolume(t, all); !strings.HasPrefix(got, "claim ") {
		t.Errorf("with every component: the state directory is on %s, want a claim", got)
	}
}

// TestK8sNetworkPolicyIngressFromMonitoring: the http port is open only
// to the namespaces a namespaceSelector picks (the monitoring one), never
// to every source.
func TestK8sNetworkPolicyIngressFromMonitoring(t *testing.T) {
	objs := loadK8s(t)
	var np networkPolicySpec
	pol := theOnly(t, objs, "NetworkPolicy", &np)
	if len(np.Ingress) == 0 {
		t.Fatalf("%s: no ingress rule: the http port would be closed to Prometheus", pol)
	}
	for i, r := range np.Ingress {
		if len(r.From) == 0 {
			t.Errorf("%s: ingress rule %d has no from: the port is open to every namespace", pol, i)
			continue
		}
		for _, f := range r.From {
			peer, _ := f.(map[string]any)
			ns, _ := peer["namespaceSelector"].(map[string]any)
			labels, _ := ns["matchLabels"].(map[string]any)
			if len(labels) == 0 {
				t.Errorf("%s: ingress rule %d: from %v, want a namespaceSelector with matchLabels (the monitoring namespace's)", pol, i, f)
			}
		}
	}
}

// TestK8sHTTPTokenComponent renders the base with the http-token
// component: PROCESSOR_HTTP_TOKEN_FILE names the file of a mounted
// Secret's key, read-only, which the processor accepts as a setting.
func TestK8sHTTPTokenComponent(t *testing.T) {
	if k := readKustomization(t, "k8s/components/http-token"); k.Kind != "Component" {
		t.Errorf("k8s/components/http-token: kind %q, want Component", k.Kind)
	}
	objs := kustomizeBuild(t, overlay(t, []string{"http-token"}, ""))
	sts, spec, c := theStatefulSet(t, objs)
	e := podEnv(t, objs, sts, c)
	checkKnownVars(t, []envSet{e})
	file := e.get(config.EnvName("HTTP_TOKEN_FILE"))
	found := false
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				found = found || (path.Join(m.MountPath, it.Path) == file && it.Key == "token" && readOnlyMount(t, sts, m.Name))
			}
		}
	}
	if file == "" || !found {
		t.Errorf("%s with the http-token component: PROCESSOR_HTTP_TOKEN_FILE=%q is not the key token of a Secret mounted read-only", sts, file)
	}
}
