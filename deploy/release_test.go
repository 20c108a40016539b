package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The licence, the image's labels and base images, the version rule and
// the changelog: what a platform team's review reads first.

const (
	licenseFile   = "../LICENSE"
	noticeFile    = "../NOTICE"
	changelogFile = "../CHANGELOG.md"
	versionFile   = "../VERSION"
	versionScript = "../scripts/version.sh"

	// The SPDX identifier of LICENSE, and of the image's licences label.
	licenseSPDX = "Apache-2.0"
	// sha256 of the Apache License 2.0's terms, from its first line
	// ("Apache License") to "END OF TERMS AND CONDITIONS" inclusive, as
	// published at https://www.apache.org/licenses/LICENSE-2.0.txt (the
	// leading blank line and indentation kept, lines ending in \n).
	apache2TermsSHA256 = "a6cba85bc92e0cff7a450b1d873c0eaa2e9fc96bf472df0247a26bec77bf3ff9"
	// The appendix's copyright line, filled in.
	copyrightLine = "Copyright 2026 The processor authors"
)

// unpinnedBases are the base images the Dockerfile may use by tag alone,
// each with the reason: none today. A new entry needs a reason a reviewer
// accepts (e.g. no registry serves a digest for it).
var unpinnedBases = map[string]string{}

func TestLicense(t *testing.T) {
	text := readFile(t, licenseFile)
	start := strings.Index(text, "                                 Apache License\n")
	end := strings.Index(text, "END OF TERMS AND CONDITIONS\n")
	if start < 0 || end < 0 {
		t.Fatalf("%s is not the Apache License 2.0 (no title or no end of its terms)", licenseFile)
	}
	terms := text[start : end+len("END OF TERMS AND CONDITIONS\n")]
	sum := sha256.Sum256([]byte(terms))
	if got := hex.EncodeToString(sum[:]); got != apache2TermsSHA256 {
		t.Errorf("%s: the terms differ from the Apache License 2.0's (sha256 %s, want %s): keep the licence text verbatim", licenseFile, got, apache2TermsSHA256)
	}
	if strings.TrimSpace(text[:start]) != "" {
		t.Errorf("%s: text before the licence's title: %q", licenseFile, text[:start])
	}
	if !strings.Contains(text[end:], "   "+copyrightLine+"\n") || strings.Contains(text, "[yyyy]") {
		t.Errorf("%s: the appendix's copyright line is not %q", licenseFile, copyrightLine)
	}
	if notice := readFile(t, noticeFile); !strings.Contains(notice, copyrightLine) || !strings.Contains(notice, "Apache License, Version 2.0") {
		t.Errorf("%s: want the copyright line %q and the licence's name", noticeFile, copyrightLine)
	}
	// The Dockerfile carries the SPDX header; the image the label.
	df := readFile(t, dockerfileFile)
	if !strings.Contains(df, "# SPDX-License-Identifier: "+licenseSPDX+"\n") {
		t.Errorf("%s: no SPDX-License-Identifier: %s header", dockerfileFile, licenseSPDX)
	}
}

// parseImageRef splits an image reference name[:tag][@digest].
func parseImageRef(ref string) (name, tag, digest string) {
	name, digest, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

func TestParseImageRef(t *testing.T) {
	for ref, want := range map[string][3]string{
		"golang:1.26.8@sha256:ab":                   {"golang", "1.26.8", "sha256:ab"},
		"gcr.io/distroless/static-debian12:nonroot": {"gcr.io/distroless/static-debian12", "nonroot", ""},
		"localhost:5000/processor":                  {"localhost:5000/processor", "", ""},
		"scratch":                                   {"scratch", "", ""},
	} {
		if n, tg, d := parseImageRef(ref); [3]string{n, tg, d} != want {
			t.Errorf("parseImageRef(%q) = %q, %q, %q; want %q", ref, n, tg, d, want)
		}
	}
}

// TestDockerfileBasesPinned: every image a stage starts from (not another
// stage, not scratch) is name:tag@sha256:<64 hex digits>, so that a
// rebuild of a commit uses the same bases; the tag says which release the
// digest is, for the reader and for TestDockerfileGoVersion. One image is
// pinned to one digest throughout.
func TestDockerfileBasesPinned(t *testing.T) {
	df := parseDockerfile(t, dockerfileFile)
	digestRE := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	pinned := map[string]string{} // name:tag -> digest
	for _, st := range df.stages {
		if df.stage(st.base) != nil || st.base == "scratch" {
			continue
		}
		if strings.Contains(st.base, "$") {
			t.Errorf("%s: stage %q starts from %q: a variable in FROM cannot be checked; write the reference out", dockerfileFile, st.name, st.base)
			continue
		}
		name, tag, digest := parseImageRef(st.base)
		if reason, ok := unpinnedBases[name+":"+tag]; ok && digest == "" {
			t.Logf("%s: %s:%s is not pinned: %s", dockerfileFile, name, tag, reason)
			continue
		}
		if tag == "" || tag == "latest" || !digestRE.MatchString(digest) {
			t.Errorf("%s: stage %q starts from %q: want name:tag@sha256:<digest> (docker buildx imagetools inspect name:tag), or an entry in unpinnedBases with the reason", dockerfileFile, st.name, st.base)
			continue
		}
		if prev, ok := pinned[name+":"+tag]; ok && prev != digest {
			t.Errorf("%s: %s:%s is pinned to %s and to %s; use one digest", dockerfileFile, name, tag, prev, digest)
		}
		pinned[name+":"+tag] = digest
	}
	if len(pinned) == 0 {
		t.Errorf("%s: no base image pinned", dockerfileFile)
	}
	for name := range unpinnedBases {
		if _, ok := pinned[name]; ok {
			t.Errorf("unpinnedBases lists %s, which %s pins now: remove the entry", name, dockerfileFile)
		}
	}
}

// labels returns the LABEL key/value pairs of a stage's chain, the
// stage's own last.
func (df *dockerfile) labels(st *dfStage) map[string]string {
	out := map[string]string{}
	chain := df.chain(st)
	for i := len(chain) - 1; i >= 0; i-- {
		for _, in := range chain[i].instrs {
			if in.cmd != "LABEL" {
				continue
			}
			for _, w := range shellWords(in.args) {
				if k, v, ok := strings.Cut(w, "="); ok {
					out[k] = v
				}
			}
		}
	}
	return out
}

// args returns the ARGs a stage's chain declares.
func (df *dockerfile) stageArgs(st *dfStage) []string {
	var out []string
	for _, s := range df.chain(st) {
		for _, in := range s.instrs {
			if in.cmd == "ARG" {
				k, _, _ := strings.Cut(in.args, "=")
				out = append(out, k)
			}
		}
	}
	return out
}

// TestDockerfileLabels: the images carry the OCI labels a registry and a
// scanner read: title, source (the module's repository), licences (the
// licence of LICENSE), version and revision (build arguments).
func TestDockerfileLabels(t *testing.T) {
	df := parseDockerfile(t, dockerfileFile)
	module := ""
	if m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindStringSubmatch(readFile(t, goModFile)); m != nil {
		module = m[1]
	}
	for _, name := range []string{"processor", "with-plugins", "loadgen"} {
		st := df.stage(name)
		if st == nil {
			t.Errorf("%s: no stage %s", dockerfileFile, name)
			continue
		}
		l := df.labels(st)
		want := map[string]string{
			"org.opencontainers.image.source":   "https://" + module,
			"org.opencontainers.image.licenses": licenseSPDX,
			"org.opencontainers.image.version":  "${VERSION}",
			"org.opencontainers.image.revision": "${REVISION}",
		}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("%s: stage %s: label %s=%q, want %q", dockerfileFile, name, k, l[k], v)
			}
		}
		if l["org.opencontainers.image.title"] == "" {
			t.Errorf("%s: stage %s has no org.opencontainers.image.title", dockerfileFile, name)
		}
		for _, arg := range []string{"VERSION", "REVISION"} {
			if !slices.Contains(df.stageArgs(st), arg) {
				t.Errorf("%s: stage %s labels ${%s} but declares no ARG %s, so the label is always empty", dockerfileFile, name, arg, arg)
			}
		}
	}
}

// versionRepo is a directory holding scripts/version.sh and a VERSION file
// of base, outside any git repository.
func versionRepo(t *testing.T, base string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "version.sh"), []byte(readFile(t, versionScript)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte(base+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runVersion runs dir's scripts/version.sh from cwd with PATH path.
func runVersion(t *testing.T, dir, cwd, path string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", filepath.Join(dir, "scripts", "version.sh"))
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=" + path, "HOME=" + dir, "GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir), "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestVersionRule runs scripts/version.sh, the rule make build and the
// image bake in, against a git repository it builds: no git, no commit,
// untagged, dirty, tagged, tagged and dirty, another tag.
func TestVersionRule(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	path := os.Getenv("PATH")
	dir := versionRepo(t, "0.5.0")
	check := func(what, want string) {
		t.Helper()
		got, err := runVersion(t, dir, dir, path)
		if err != nil || got != want {
			t.Errorf("%s: scripts/version.sh printed %q (%v), want %q", what, got, err, want)
		}
	}

	// No git at all (an image build): the VERSION file's dev version.
	if got, err := runVersion(t, dir, dir, "/nonexistent"); err != nil || got != "v0.5.0-dev" {
		t.Errorf("without git: %q (%v), want v0.5.0-dev", got, err)
	}
	check("not a repository", "v0.5.0-dev")
	git(t, dir, "init", "-q")
	check("a repository without a commit", "v0.5.0-dev")

	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "first")
	hash := git(t, dir, "rev-parse", "--short=12", "HEAD")
	check("untagged", "v0.5.0-dev+"+hash)
	// From another directory (make -C, the Dockerfile's WORKDIR).
	if got, err := runVersion(t, dir, t.TempDir(), path); err != nil || got != "v0.5.0-dev+"+hash {
		t.Errorf("run from elsewhere: %q (%v), want v0.5.0-dev+%s", got, err, hash)
	}
	// Untracked files do not count, modified tracked files do.
	if err := os.WriteFile(filepath.Join(dir, "untracked"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("untracked file", "v0.5.0-dev+"+hash)
	if err := os.WriteFile(filepath.Join(dir, "scripts", "version.sh"), []byte(readFile(t, versionScript)+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("dirty", "v0.5.0-dev+"+hash+".dirty")
	git(t, dir, "checkout", "-q", "--", "scripts/version.sh")

	git(t, dir, "tag", "v0.4.0") // a tag that is not VERSION's
	check("tagged with another version", "v0.5.0-dev+"+hash)
	git(t, dir, "tag", "-a", "-m", "release", "v0.5.0") // annotated, as releases are
	check("tagged", "v0.5.0")
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("0.5.0\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("tagged and dirty", "v0.5.0-dev+"+hash+".dirty")
	git(t, dir, "checkout", "-q", "--", "VERSION")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "after the release")
	check("after the tag", "v0.5.0-dev+"+git(t, dir, "rev-parse", "--short=12", "HEAD"))
}

// TestVersionFileForms: VERSION must be MAJOR.MINOR.PATCH; anything else
// fails the build, saying so.
func TestVersionFileForms(t *testing.T) {
	for base, ok := range map[string]bool{
		"0.5.0": true, "10.20.30": true, "0.0.0": true,
		"": false, "v0.5.0": false, "0.5": false, "0.5.0.1": false, "0.05.0": false, "0.5.0-rc1": false, "0.5.x": false,
	} {
		dir := versionRepo(t, base)
		got, err := runVersion(t, dir, dir, "/nonexistent")
		switch {
		case ok && (err != nil || got != "v"+base+"-dev"):
			t.Errorf("VERSION %q: %q (%v), want v%s-dev", base, got, err, base)
		case !ok && (err == nil || !strings.Contains(got, "MAJOR.MINOR.PATCH")):
			t.Errorf("VERSION %q: %q (%v), want a failure naming MAJOR.MINOR.PATCH", base, got, err)
		}
	}
	dir := versionRepo(t, "0.5.0")
	if err := os.Remove(filepath.Join(dir, "VERSION")); err != nil {
		t.Fatal(err)
	}
	if got, err := runVersion(t, dir, dir, "/nonexistent"); err == nil || !strings.Contains(got, "cannot read") {
		t.Errorf("no VERSION file: %q (%v), want a failure", got, err)
	}
}

// TestMakeVersion: make build's version is the script's, from this
// repository's VERSION file.
func TestMakeVersion(t *testing.T) {
	mk := parseMakefile(t)
	if got := mk.vars["VERSION"]; got != "$(shell sh scripts/version.sh)" {
		t.Errorf("%s: VERSION := %q, want $(shell sh scripts/version.sh)", makefileFile, got)
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	out, err := exec.Command("make", "-s", "-C", "..", "version").CombinedOutput()
	if err != nil {
		t.Fatalf("make -s version: %v\n%s", err, out)
	}
	script, err := exec.Command("sh", versionScript).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/version.sh: %v\n%s", err, script)
	}
	if strings.TrimSpace(string(out)) != strings.TrimSpace(string(script)) {
		t.Errorf("make -s version printed %q, scripts/version.sh %q", out, script)
	}
	base := strings.TrimSpace(readFile(t, versionFile))
	if !strings.HasPrefix(string(out), "v"+base) {
		t.Errorf("make -s version printed %q, not a version of VERSION's %s", out, base)
	}
}

// TestChangelog: Keep a Changelog form (https://keepachangelog.com/en/1.1.0/):
// an [Unreleased] section first, then releases newest first, each
// "## [X.Y.Z] - YYYY-MM-DD" with a link reference; none newer than
// VERSION, the release being worked towards.
func TestChangelog(t *testing.T) {
	text := readFile(t, changelogFile)
	if !strings.HasPrefix(text, "# Changelog\n") {
		t.Errorf("%s: does not start with # Changelog", changelogFile)
	}
	for _, s := range []string{"keepachangelog.com", "semver.org", "scripts/version.sh"} {
		if !strings.Contains(text, s) {
			t.Errorf("%s: the header does not mention %s", changelogFile, s)
		}
	}
	headRE := regexp.MustCompile(`(?m)^## \[([^\]]+)\](.*)$`)
	releaseRE := regexp.MustCompile(`^ - \d{4}-\d{2}-\d{2}$`)
	heads := headRE.FindAllStringSubmatch(text, -1)
	if len(heads) < 2 || heads[0][1] != "Unreleased" || heads[0][2] != "" {
		t.Fatalf("%s: want ## [Unreleased] and then at least one release: %q", changelogFile, heads)
	}
	base := strings.TrimSpace(readFile(t, versionFile))
	prev := ""
	for _, h := range heads[1:] {
		v := h[1]
		if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) || !releaseRE.MatchString(h[2]) {
			t.Errorf("%s: heading %q, want ## [X.Y.Z] - YYYY-MM-DD", changelogFile, h[0])
			continue
		}
		if semver(v, base) > 0 {
			t.Errorf("%s: release %s is newer than VERSION %s", changelogFile, v, base)
		}
		if prev != "" && semver(v, prev) >= 0 {
			t.Errorf("%s: release %s is listed after %s; newest first", changelogFile, v, prev)
		}
		prev = v
	}
	for _, h := range heads {
		if !regexp.MustCompile(`(?m)^\[` + regexp.QuoteMeta(h[1]) + `\]: https://\S+$`).MatchString(text) {
			t.Errorf("%s: no link reference for [%s]", changelogFile, h[1])
		}
	}
	for _, sec := range regexp.MustCompile(`(?m)^### (.*)$`).FindAllStringSubmatch(text, -1) {
		if !slices.Contains([]string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, sec[1]) {
			t.Errorf("%s: section %q is none of Keep a Changelog's", changelogFile, sec[0])
		}
	}
}

// TestDockerfileVersionFallback: an image built without the VERSION
// build argument still bakes in a version by the rule (scripts/version.sh,
// v<VERSION>-dev in a context without .git), not an empty one.
func TestDockerfileVersionFallback(t *testing.T) {
	df := parseDockerfile(t, dockerfileFile)
	_, st := processorBuild(t, df)
	found := false
	for _, in := range st.instrs {
		if in.cmd == "RUN" && len(goBuilds(runCommand(in))) > 0 {
			found = strings.Contains(runCommand(in), `VERSION="${VERSION:-$(sh scripts/version.sh)}" &&`)
		}
	}
	if !found {
		t.Errorf("%s: the processor's go build does not fall back to scripts/version.sh when VERSION is not passed", dockerfileFile)
	}
}
