package deploy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tools that render the manifests as a cluster would get them:
// kustomize (the base, its components, overlays) and helm (the chart).
// .ci/run builds both from the Go module proxy at pinned versions into
// deploy/.cache/bin; a developer may have them on the PATH instead (or
// kubectl, whose kustomize is built in). Without them a test that needs
// one is skipped, except under CI, which must have installed them.

// toolsDir is where .ci/run installs helm and kustomize.
const toolsDir = ".cache/bin"

// tool returns the command line that runs name: toolsDir's, the PATH's,
// or for kustomize kubectl's built-in one.
func tool(t *testing.T, name string) []string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join(toolsDir, name)); err == nil {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return []string{p}
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return []string{p}
	}
	if name == "kustomize" {
		if p, err := exec.LookPath("kubectl"); err == nil {
			return []string{p, "kustomize"}
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found (in deploy/%s or on the PATH), and CI is set: .ci/run must install it", name, toolsDir)
	}
	t.Skipf("%s not found: .ci/run installs it in deploy/%s (go install, pinned); the rendering is not checked", name, toolsDir)
	return nil
}

// run runs a tool with args and returns its standard output.
func runTool(t *testing.T, cmdline []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cmdline[0], append(cmdline[1:], args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || stderr.Len() > 0 {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(cmdline[0]), strings.Join(append(cmdline[1:], args...), " "), err, stderr.String())
		}
		t.Fatalf("%s: %v", cmdline[0], err)
	}
	return out
}

// parseRendered parses rendered manifests, naming them what.
func parseRendered(t *testing.T, what string, out []byte) []k8sObject {
	t.Helper()
	f := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	objs := loadManifests(t, f)
	for i := range objs {
		objs[i].file = what
	}
	return objs
}

// kustomizeBuild renders the kustomization in dir.
func kustomizeBuild(t *testing.T, dir string) []k8sObject {
	t.Helper()
	cmd, args := tool(t, "kustomize"), []string{"build", dir}
	if len(cmd) > 1 { // kubectl kustomize DIR
		args = []string{dir}
	}
	return parseRendered(t, "kustomize "+dir, runTool(t, cmd, args...))
}

// overlay writes a kustomization of deploy/k8s with components and the
// rest of its text (patches:, configMapGenerator: ...) into a temporary
// directory and returns the directory.
func overlay(t *testing.T, components []string, rest string) string {
	t.Helper()
	abs, err := filepath.Abs(k8sDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: orders\nresources:\n  - " + rel + "\n")
	if len(components) > 0 {
		b.WriteString("components:\n")
		for _, c := range components {
			b.WriteString("  - " + rel + "/components/" + c + "\n")
		}
	}
	b.WriteString(rest)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
