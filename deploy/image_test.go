package deploy

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

const (
	dockerfileFile   = "Dockerfile"
	dockerignoreFile = "../.dockerignore"
	makefileFile     = "../Makefile"
	goModFile        = "../go.mod"

	// versionVar stands for the version in the go build flags of the
	// Dockerfile (${VERSION}) and the Makefile ($(VERSION)).
	versionVar = "<VERSION>"
	// The variable the version is baked into (-X).
	versionSymbol = "github.com/streamproc/processor/cmd/processor/app.Version"
	// The build tags of the image's processor: no embedded broker.
	imageTags = "-tags=noembedded"
)

// ------------------------------------------------------------ parsing ----

type dfInstr struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string // the rest, continuation lines joined
	line int
}

type dfStage struct {
	name     string // after AS; "" for an unnamed stage
	base     string // image or stage it starts from
	platform string
	instrs   []dfInstr
}

type dockerfile struct {
	args   map[string]string // ARGs before the first FROM, with their defaults
	stages []*dfStage
}

// parseDockerfile reads the instructions of a Dockerfile: comments and
// blank lines dropped, continuation lines (\) joined.
func parseDockerfile(t *testing.T, name string) *dockerfile {
	t.Helper()
	df := &dockerfile{args: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, name)))
	var cur *dfInstr
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cont := strings.HasSuffix(line, `\`)
		line = strings.TrimSpace(strings.TrimSuffix(line, `\`))
		if cur == nil {
			cmd, args, _ := strings.Cut(line, " ")
			cur = &dfInstr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: n}
		} else {
			cur.args += " " + line
		}
		if cont {
			continue
		}
		in := *cur
		cur = nil
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := &dfStage{}
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--platform="); ok {
					st.platform = v
				}
				f = f[1:]
			}
			if len(f) == 0 {
				t.Fatalf("%s:%d: FROM without an image", name, in.line)
			}
			st.base = f[0]
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			df.stages = append(df.stages, st)
		case len(df.stages) == 0:
			if in.cmd == "ARG" {
				k, v, _ := strings.Cut(in.args, "=")
				df.args[k] = v
			}
		default:
			st := df.stages[len(df.stages)-1]
			st.instrs = append(st.instrs, in)
		}
	}
	if cur != nil {
		t.Fatalf("%s: ends in a continuation line", name)
	}
	if len(df.stages) == 0 {
		t.Fatalf("%s: no FROM", name)
	}
	return df
}

// stage returns the stage named name, or nil.
func (df *dockerfile) stage(name string) *dfStage {
	for _, s := range df.stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

// chain returns st and the stages it is built on, st first.
func (df *dockerfile) chain(st *dfStage) []*dfStage {
	out := []*dfStage{st}
	for s := df.stage(st.base); s != nil && !slices.Contains(out, s); s = df.stage(s.base) {
		out = append(out, s)
	}
	return out
}

// last returns the stage's last instruction cmd (inherited from the stages
// it is built on), or "".
func (df *dockerfile) last(st *dfStage, cmd string) (string, *dfStage) {
	for _, s := range df.chain(st) {
		for i := len(s.instrs) - 1; i >= 0; i-- {
			if s.instrs[i].cmd == cmd {
				return s.instrs[i].args, s
			}
		}
	}
	return "", nil
}

// image returns the image a stage's chain starts from.
func (df *dockerfile) image(st *dfStage) string {
	c := df.chain(st)
	return c[len(c)-1].base
}

// entrypoint returns the stage's ENTRYPOINT in exec form.
func (df *dockerfile) entrypoint(t *testing.T, st *dfStage) []string {
	t.Helper()
	args, _ := df.last(st, "ENTRYPOINT")
	var ep []string
	if err := json.Unmarshal([]byte(args), &ep); err != nil {
		t.Fatalf("%s: stage %q: ENTRYPOINT %q is not in exec (JSON) form, so signals would not reach the processor: %v", dockerfileFile, st.name, args, err)
	}
	return ep
}

// copies returns the COPY instructions of st: flags (e.g. from=build),
// sources and destination.
func copies(st *dfStage) []dfCopy {
	var out []dfCopy
	for _, in := range st.instrs {
		if in.cmd != "COPY" {
			continue
		}
		f := strings.Fields(in.args)
		c := dfCopy{flags: map[string]string{}}
		for len(f) > 0 && strings.HasPrefix(f[0], "--") {
			k, v, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
			c.flags[k] = v
			f = f[1:]
		}
		if len(f) >= 2 {
			c.src, c.dst = f[:len(f)-1], f[len(f)-1]
		}
		out = append(out, c)
	}
	return out
}

type dfCopy struct {
	flags map[string]string
	src   []string
	dst   string
}

// shellWords splits a shell command into words, with quotes removed (no
// expansion); an unquoted ; is a word of its own.
func shellWords(s string) []string {
	var words []string
	var b strings.Builder
	inWord := false
	var quote rune
	flush := func() {
		if inWord {
			words = append(words, b.String())
			b.Reset()
			inWord = false
		}
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else if r == '\\' && quote == '"' && i+1 < len(rs) && strings.ContainsRune(`"\$`+"`", rs[i+1]) {
				i++
				b.WriteRune(rs[i])
			} else {
				b.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			b.WriteRune(rs[i])
			inWord = true
		case r == ';':
			flush()
			words = append(words, ";")
		case r == ' ' || r == '\t' || r == '\n':
			flush()
		default:
			b.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words
}

// goBuild is one go build command: its environment assignments, its flags
// (-name or -name=value, in order, -o left out), its output and packages.
type goBuild struct {
	env    map[string]string
	flags  []string
	output string
	pkgs   []string
}

// go build flags that take a value.
var valueFlags = []string{"o", "ldflags", "gcflags", "asmflags", "tags", "buildmode", "mod", "modfile", "p", "pgo", "toolexec", "overlay", "C", "installsuffix", "compiler", "gccgoflags"}

// goBuilds finds the go build commands in a shell command.
func goBuilds(cmd string) []goBuild {
	w := shellWords(cmd)
	var out []goBuild
	for i := 0; i+1 < len(w); i++ {
		if w[i] != "go" || w[i+1] != "build" {
			continue
		}
		gb := goBuild{env: map[string]string{}}
		for j := i - 1; j >= 0; j-- {
			k, v, ok := strings.Cut(w[j], "=")
			if !ok || !regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`).MatchString(k) {
				break
			}
			gb.env[k] = v
		}
		for j := i + 2; j < len(w); j++ {
			a := w[j]
			if slices.Contains([]string{";", "&&", "||", "|", "done", "fi"}, a) {
				break
			}
			if !strings.HasPrefix(a, "-") {
				gb.pkgs = append(gb.pkgs, a)
				continue
			}
			name := strings.TrimLeft(a, "-")
			if k, v, ok := strings.Cut(name, "="); ok {
				name, a = k, "-"+k+"="+v
			} else if slices.Contains(valueFlags, name) && j+1 < len(w) {
				j++
				a = "-" + name + "=" + w[j]
			} else {
				a = "-" + name
			}
			if name == "o" {
				gb.output = strings.TrimPrefix(a, "-o=")
				continue
			}
			gb.flags = append(gb.flags, a)
		}
		out = append(out, gb)
	}
	return out
}

// runCommand returns a RUN instruction's shell command, without its
// --mount and other flags.
func runCommand(in dfInstr) string {
	args := in.args
	for strings.HasPrefix(args, "--") {
		_, rest, _ := strings.Cut(args, " ")
		args = strings.TrimSpace(rest)
	}
	return args
}

// dockerfileBuilds returns the go build commands of a stage's RUN
// instructions, with ${VERSION} as versionVar.
func dockerfileBuilds(st *dfStage) []goBuild {
	var out []goBuild
	for _, in := range st.instrs {
		if in.cmd != "RUN" {
			continue
		}
		cmd := strings.NewReplacer("${VERSION}", versionVar, "$VERSION", versionVar).Replace(runCommand(in))
		out = append(out, goBuilds(cmd)...)
	}
	return out
}

// makefile holds a Makefile's variables and its targets' recipes.
type makefile struct {
	vars    map[string]string
	recipes map[string]string // target -> recipe, lines joined with "; "
}

func parseMakefile(t *testing.T) makefile {
	t.Helper()
	mk := makefile{vars: map[string]string{}, recipes: map[string]string{}}
	varRE := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\?=|=)\s*(.*)$`)
	targetRE := regexp.MustCompile(`^([A-Za-z0-9_.-]+):`)
	target := ""
	var joined []string
	pending := ""
	for _, line := range strings.Split(readFile(t, makefileFile), "\n") {
		if pending != "" {
			line = pending + " " + strings.TrimSpace(line)
			pending = ""
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		joined = append(joined, line)
	}
	for _, line := range joined {
		switch {
		case strings.HasPrefix(line, "\t") && target != "":
			r := strings.TrimSpace(line)
			r = strings.TrimLeft(r, "@-")
			if mk.recipes[target] != "" {
				mk.recipes[target] += "; "
			}
			mk.recipes[target] += r
		case varRE.MatchString(line):
			m := varRE.FindStringSubmatch(line)
			mk.vars[m[1]] = m[2]
			target = ""
		case targetRE.MatchString(line):
			target = targetRE.FindStringSubmatch(line)[1]
		default:
			if !strings.HasPrefix(line, "\t") {
				target = ""
			}
		}
	}
	return mk
}

// expand expands $(NAME) references (VERSION becomes versionVar, GO
// becomes go) and make's $$.
func (mk makefile) expand(s string) string {
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for range 10 {
		s = ref.ReplaceAllStringFunc(s, func(m string) string {
			name := m[2 : len(m)-1]
			switch name {
			case "VERSION":
				return versionVar
			case "GO":
				return "go"
			}
			return mk.vars[name]
		})
	}
	return strings.ReplaceAll(s, "$$", "$")
}

// makeBuilds returns the go build commands of a Makefile target.
func makeBuilds(t *testing.T, mk makefile, target string) []goBuild {
	t.Helper()
	recipe, ok := mk.recipes[target]
	if !ok {
		t.Fatalf("%s: no target %q", makefileFile, target)
	}
	builds := goBuilds(mk.expand(recipe))
	if len(builds) == 0 {
		t.Fatalf("%s: target %q runs no go build: %s", makefileFile, target, recipe)
	}
	return builds
}

// processorBuild returns the Dockerfile's go build of cmd/processor and
// the stage that runs it.
func processorBuild(t *testing.T, df *dockerfile) (goBuild, *dfStage) {
	t.Helper()
	for _, st := range df.stages {
		for _, gb := range dockerfileBuilds(st) {
			if slices.Contains(gb.pkgs, "./cmd/processor") || slices.Contains(gb.pkgs, "./cmd/...") {
				return gb, st
			}
		}
	}
	t.Fatalf("%s: no go build of ./cmd/processor", dockerfileFile)
	return goBuild{}, nil
}

// binaryPath returns where go build puts the binary of pkg (./cmd/NAME)
// with output out (a directory when it ends in /).
func binaryPath(out, pkg string) string {
	if strings.HasSuffix(out, "/") {
		return out + path.Base(pkg)
	}
	return out
}

// ------------------------------------------------------------- tests ----

func TestDockerfileGoVersion(t *testing.T) {
	df := parseDockerfile(t, dockerfileFile)
	mod := readFile(t, goModFile)
	want := ""
	if m := regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`).FindStringSubmatch(mod); m != nil {
		want = m[1]
	}
	if m := regexp.MustCompile(`(?m)^toolchain\s+go(\S+)\s*$`).FindStringSubmatch(mod); m != nil {
		want = m[1] // a toolchain line names the Go release that builds the module
	}
	if want == "" {
		t.Fatalf("%s: no go directive", goModFile)
	}
	_, st := processorBuild(t, df)
	base := df.image(st)
	for k, v := range df.args {
		base = strings.ReplaceAll(base, "${"+k+"}", v)
	}
	image, tag, _ := parseImageRef(base)
	if image != "golang" && image != "docker.io/library/golang" {
		t.Errorf("%s: the build stage starts from %s, want the golang image", dockerfileFile, base)
	}
	if tag != want && !strings.HasPrefix(tag, want+"-") {
		t.Errorf("%s: the build stage uses Go %s (%s), want %s as in %s", dockerfileFile, tag, base, want, goModFile)
	}
}

func TestDockerfileBuildsLikeMakefile(t *testing.T) {
	df := parseDockerfile(t, dockerfileFile)
	mk := parseMakefile(t)

	img, _ := processorBuild(t, df)
	if got := img.env["CGO_ENABLED"]; got != "0" {
		t.Errorf("%s: the processor's go build has CGO_ENABLED=%q, want 0 (a static binary for distroless static or scratch)", dockerfileFile, got)
	}
	for _, pkg := range []string{"./cmd/processor", "./cmd/loadgen"} {
		if !slices.Contains(img.pkgs, pkg) && !slices.Contains(img.pkgs, "./cmd/...") {
			t.Errorf("%s: go build %v does not build %s", dockerfileFile, img.pkgs, pkg)
		}
	}

	var local goBuild
	for _, gb := range makeBuilds(t, mk, "build") {
		if slices.Contains(gb.pkgs, "./cmd/...") || slices.Contains(gb.pkgs, "./cmd/processor") {
			local = gb
		}
	}
	if local.pkgs == nil {
		t.Fatalf("%s: target build does not build ./cmd/processor", makefileFile)
	}
	// The image's flags are make build's plus -tags noembedded: the
	// embedded test broker (kfake) is left out of the image.
	if !slices.Contains(img.flags, imageTags) {
		t.Errorf("%s: the processor's go build flags %q lack %s: the image must leave the embedded broker out", dockerfileFile, img.flags, imageTags)
	}
	if slices.Contains(local.flags, imageTags) {
		t.Errorf("%s: make build has %s, but make run needs the embedded broker", makefileFile, imageTags)
	}
	if bare := slices.DeleteFunc(slices.Clone(img.flags), func(f string) bool { return f == imageTags }); !slices.Equal(bare, local.flags) {
		t.Errorf("go build flags differ (besides %s):\n  %s: %q\n  %s (make build): %q", imageTags, dockerfileFile, bare, makefileFile, local.flags)
	}
	want := "-ldflags=-X " + versionSymbol + "=" + versionVar
	if !slices.Contains(img.flags, want) {
		t.Errorf("%s: go build flags %q do not bake in the version: want %q", dockerfileFile, img.flags, want)
	}
	if binaryPath(local.output, "./cmd/processor") != "bin/processor" {
		t.Errorf("%s: make build writes the processor to %s, want bin/processor", makefileFile, binaryPath(local.output, "./cmd/processor"))
	}
}

func TestDockerfilePluginsLikeMakefile(t *testing.T) {
	df := parseDockerfile(t, dockerfileFile)
	mk := parseMakefile(t)
	local := makeBuilds(t, mk, "plugins")[0]

	st := df.stage("plugins")
	if st == nil {
		t.Fatalf("%s: no stage named plugins", dockerfileFile)
	}
	builds := dockerfileBuilds(st)
	if len(builds) != 1 {
		t.Fatalf("%s: stage plugins has %d go builds, want 1", dockerfileFile, len(builds))
	}
	img := builds[0]
	if !slices.Equal(img.flags, local.flags) {
		t.Errorf("plugin go build flags differ:\n  %s: %q\n  %s (make plugins): %q", dockerfileFile, img.flags, makefileFile, local.flags)
	}
	for _, k := range []string{"GOOS", "GOARCH"} {
		if img.env[k] != local.env[k] || img.env[k] == "" {
			t.Errorf("plugin build %s: %s has %q, %s %q", k, dockerfileFile, img.env[k], makefileFile, local.env[k])
		}
	}
	if path.Ext(img.output) != ".wasm" || path.Ext(local.output) != ".wasm" {
		t.Errorf("plugin outputs %q (%s) and %q (%s): want .wasm files", img.output, dockerfileFile, local.output, makefileFile)
	}
	if len(img.pkgs) != 1 || !strings.HasPrefix(img.pkgs[0], "./examples/wasm/") {
		t.Errorf("%s: plugin build packages %q, want one ./examples/wasm/<name>", dockerfileFile, img.pkgs)
	}
}

// pluginsDir returns where the with-plugins image holds the plugins, and
// the plugins there: every examples/wasm/<name>/main.go.
func pluginsDir(t *testing.T, df *dockerfile) (string, []string) {
	t.Helper()
	st := df.stage("with-plugins")
	if st == nil {
		t.Fatalf("%s: no stage named with-plugins", dockerfileFile)
	}
	dir := ""
	for _, c := range copies(st) {
		if c.flags["from"] == "plugins" {
			dir = c.dst
		}
	}
	if dir == "" {
		t.Fatalf("%s: stage with-plugins copies nothing from stage plugins", dockerfileFile)
	}
	mains, err := filepath.Glob("../examples/wasm/*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no examples/wasm/*/main.go (%v)", err)
	}
	var names []string
	for _, m := range mains {
		names = append(names, filepath.Base(filepath.Dir(m)))
	}
	return strings.TrimSuffix(dir, "/"), names
}

func TestDockerfileRuntime(t *testing.T) {
	df := parseDockerfile(t, dockerfileFile)
	gb, buildStage := processorBuild(t, df)
	wantPort := defaultHTTPPort(t)

	for _, target := range []struct {
		stage, binary, pkg string
	}{
		{"processor", "/processor", "./cmd/processor"},
		{"with-plugins", "/processor", "./cmd/processor"},
		{"loadgen", "/loadgen", "./cmd/loadgen"},
	} {
		st := df.stage(target.stage)
		if st == nil {
			t.Errorf("%s: no stage named %s (docker build --target %s)", dockerfileFile, target.stage, target.stage)
			continue
		}
		if ep := df.entrypoint(t, st); !slices.Equal(ep, []string{target.binary}) {
			t.Errorf("%s: stage %s: ENTRYPOINT %q, want [%q]", dockerfileFile, target.stage, ep, target.binary)
		}
		// The binary at the entrypoint is the one go build made.
		built := binaryPath(gb.output, target.pkg)
		found := false
		for _, s := range df.chain(st) {
			for _, c := range copies(s) {
				if c.flags["from"] == buildStage.name && slices.Contains(c.src, built) && c.dst == target.binary {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("%s: stage %s does not COPY --from=%s %s %s", dockerfileFile, target.stage, buildStage.name, built, target.binary)
		}
		name, tag, _ := parseImageRef(df.image(st)) // the digest: TestDockerfileBasesPinned
		image := name + ":" + tag
		if name != "scratch" && !regexp.MustCompile(`^gcr\.io/distroless/static(-debian\d+)?:nonroot$`).MatchString(image) {
			t.Errorf("%s: stage %s runs on %s, want gcr.io/distroless/static-debianN:nonroot or scratch", dockerfileFile, target.stage, image)
		}
		user, _ := df.last(st, "USER")
		uid, _, _ := strings.Cut(user, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("%s: stage %s: USER %q, want a numeric non-root user (so that Kubernetes can verify runAsNonRoot)", dockerfileFile, target.stage, user)
		}
		if target.binary == "/processor" {
			expose, _ := df.last(st, "EXPOSE")
			if expose != strconv.Itoa(wantPort) && expose != fmt.Sprintf("%d/tcp", wantPort) {
				t.Errorf("%s: stage %s: EXPOSE %q, want %d, the port of PROCESSOR_HTTP_ADDR's default", dockerfileFile, target.stage, expose, wantPort)
			}
		}
	}

	// docker build without --target: the processor.
	last := df.stages[len(df.stages)-1]
	if last.name != "processor" && last.base != "processor" {
		t.Errorf("%s: the last stage (the default target) is %q from %q, want the processor", dockerfileFile, last.name, last.base)
	}
	if len(last.instrs) > 0 && last.name != "processor" {
		t.Errorf("%s: the default target adds to the processor stage; keep it the same image", dockerfileFile)
	}

	// The plugins stage's outputs land where with-plugins copies from.
	dir, names := pluginsDir(t, df)
	if !strings.HasPrefix(dir, "/") || len(names) == 0 {
		t.Errorf("%s: plugins copied to %q", dockerfileFile, dir)
	}
	plugins := dockerfileBuilds(df.stage("plugins"))
	var src string
	for _, c := range copies(df.stage("with-plugins")) {
		if c.flags["from"] == "plugins" {
			src = strings.TrimSuffix(c.src[0], "/")
		}
	}
	if len(plugins) == 1 && path.Dir(plugins[0].output) != src {
		t.Errorf("%s: plugins are built into %s but with-plugins copies %s", dockerfileFile, path.Dir(plugins[0].output), src)
	}
	// Nothing in the image sets a variable the processor does not read.
	e := newEnvSet(dockerfileFile)
	for _, st := range df.stages {
		for _, in := range st.instrs {
			if in.cmd == "ENV" {
				for _, w := range shellWords(in.args) {
					if k, v, ok := strings.Cut(w, "="); ok {
						e.set(k, v, fmt.Sprintf("%s:%d", dockerfileFile, in.line))
					}
				}
			}
		}
	}
	if u := unknownVars(t, e); len(u) > 0 {
		t.Errorf("%s sets variables the processor does not read: %v", dockerfileFile, u)
	}
}

// dockerignored reports whether .dockerignore's patterns leave p (a
// slash-separated path from the repository's root) out of the build
// context: a pattern matches the path or one of its parent directories;
// **/ matches any directories; ! re-includes.
func dockerignored(patterns []string, p string) bool {
	ignored := false
	for _, pat := range patterns {
		neg := strings.HasPrefix(pat, "!")
		pat = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(pat, "!"), "/"), "/")
		match := false
		parts := strings.Split(p, "/")
		for i := 1; i <= len(parts) && !match; i++ {
			prefix := strings.Join(parts[:i], "/")
			if rest, ok := strings.CutPrefix(pat, "**/"); ok {
				match, _ = path.Match(rest, parts[i-1])
			} else {
				match, _ = path.Match(pat, prefix)
			}
		}
		if match {
			ignored = !neg
		}
	}
	return ignored
}

func TestDockerignore(t *testing.T) {
	var patterns []string
	for _, line := range strings.Split(readFile(t, dockerignoreFile), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	for _, p := range []string{".git/HEAD", "bin/processor", "data/broker/x", "integration/kafka/.cache/lib/kafka.jar", "integration/kafka/.run/single/x", "pipeline/pipeline.test"} {
		if !dockerignored(patterns, p) {
			t.Errorf("%s: %s is sent to the image build; leave it out", dockerignoreFile, p)
		}
	}
	// What go build needs, and the version rule's script and file.
	needed := []string{"go.mod", "go.sum", "cmd/processor/main.go", "internal/statuspage/status.html", "examples/wasm/enrich/main.go", "VERSION", "scripts/version.sh"}
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (rel == ".git" || rel == "bin" || rel == "data" || strings.Contains(rel, "/.cache") || strings.Contains(rel, "/.run")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, ".html")) && !strings.HasSuffix(rel, "_test.go") {
			needed = append(needed, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range needed {
		if dockerignored(patterns, p) {
			t.Errorf("%s leaves out %s, which go build needs", dockerignoreFile, p)
		}
	}
}

// TestImageBinary stands in for building the image, which CI does not do:
// it builds cmd/processor with exactly the Dockerfile's go build
// environment and flags, checks the version and the build settings baked
// in, then runs it as the container would (on the embedded broker) and
// checks the endpoints the probes and Prometheus use, and a clean stop.
func TestImageBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the processor")
	}
	df := parseDockerfile(t, dockerfileFile)
	gb, _ := processorBuild(t, df)
	const version = "v0.0.0-deploytest"

	bin := filepath.Join(t.TempDir(), "processor")
	args := []string{"build"}
	for _, f := range gb.flags {
		args = append(args, strings.ReplaceAll(f, versionVar, version))
	}
	args = append(args, "-o", bin, "./cmd/processor")
	env := os.Environ()
	for k, v := range gb.env {
		if !strings.Contains(v, "$") { // GOOS=$TARGETOS: this machine's
			env = append(env, k+"="+v)
		}
	}
	// A cold build takes a minute or two; leave time to report a slower one.
	deadline := time.Now().Add(9 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-30*time.Second).Before(deadline) {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = ".."
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("go %s", strings.Join(args, " "))

	t.Run("version", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), version) {
			t.Errorf("processor --version: %v, %q; want it to print %s", err, out, version)
		}
	})

	t.Run("buildinfo", func(t *testing.T) {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if settings["CGO_ENABLED"] != "0" {
			t.Errorf("built with CGO_ENABLED=%q, want 0: a static binary", settings["CGO_ENABLED"])
		}
		if slices.Contains(gb.flags, "-trimpath") && settings["-trimpath"] != "true" {
			t.Errorf("built without -trimpath: %v", settings)
		}
		// go build records -ldflags only without -trimpath (go.dev/issue/52372);
		// the version subtest and /metrics check what they set.
		if want := versionSymbol + "=" + version; settings["-trimpath"] != "true" && !strings.Contains(settings["-ldflags"], want) {
			t.Errorf("-ldflags %q, want it to set %s", settings["-ldflags"], want)
		}
		if settings["-tags"] != "noembedded" {
			t.Errorf("built with -tags %q, want noembedded", settings["-tags"])
		}
		for _, d := range info.Deps {
			if strings.HasPrefix(d.Path, "github.com/twmb/franz-go/pkg/kfake") {
				t.Errorf("the image's processor links %s %s: the embedded broker is left out of it", d.Path, d.Version)
			}
		}
		t.Logf("build settings: %v", settings)
	})

	t.Run("no embedded broker", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(processorFreeEnv(),
			"PROCESSOR_EMBEDDED_BROKER=true",
			"PROCESSOR_EMBEDDED_BROKER_ADDR="+freeAddr(t),
			"PROCESSOR_EMBEDDED_BROKER_DIR="+t.TempDir(),
			"PROCESSOR_GROUP=deploy-test", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out",
			"PROCESSOR_HTTP_ADDR="+freeAddr(t))
		code, out := exitOf(t, cmd, "the image's processor")
		if code != 2 || !strings.Contains(out, "no embedded broker") {
			t.Errorf("PROCESSOR_EMBEDDED_BROKER=true: exit %d, %q; want exit 2 (bad configuration) saying the build has no embedded broker", code, out)
		}
	})

	t.Run("serves", func(t *testing.T) { runBinary(t, bin, version) })
}

// processorFreeEnv is this process's environment without PROCESSOR_*.
func processorFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PROCESSOR_") {
			env = append(env, kv)
		}
	}
	return env
}

// probeExit runs `bin probe` against the HTTP address addr, the way the
// Compose healthcheck does (PROCESSOR_HTTP_ADDR in the environment), and
// returns its exit code and output.
func probeExit(t *testing.T, bin, addr string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, "probe")
	cmd.Env = append(processorFreeEnv(), "PROCESSOR_HTTP_ADDR="+addr)
	return exitOf(t, cmd, "processor probe")
}

// exitOf runs cmd and returns its exit code and combined output; a
// command that cannot run at all (what names it) fails the test.
func exitOf(t *testing.T, cmd *exec.Cmd, what string) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%s: %v", what, err)
	return 0, ""
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runBinary starts the processor on a kfake cluster (the image has no
// embedded broker), waits for /readyz, checks processor probe, /healthz
// and /metrics, and stops it with SIGTERM.
func runBinary(t *testing.T, bin, version string) {
	httpAddr := freeAddr(t)
	if code, out := probeExit(t, bin, httpAddr); code != 1 || !strings.Contains(out, "not ready") {
		t.Errorf("processor probe before the processor runs: exit %d, %q; want 1 saying not ready", code, out)
	}
	cluster := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out"))
	cmd := exec.Command(bin)
	cmd.Env = append(processorFreeEnv(),
		"PROCESSOR_BROKERS="+strings.Join(cluster.Brokers, ","),
		"PROCESSOR_GROUP=deploy-test",
		"PROCESSOR_INPUT_TOPICS=in",
		"PROCESSOR_OUTPUT_TOPIC=out",
		"PROCESSOR_HTTP_ADDR="+httpAddr,
		"PROCESSOR_PROGRESS_INTERVAL=0",
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("processor output:\n%s", logs.String())
		}
	}()

	base := "http://" + httpAddr
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(p string) (int, string) {
		resp, err := client.Get(base + p)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, body := get("/readyz")
		if code == http.StatusOK {
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the processor exited before /readyz answered 200: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 200 within 90s: last %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, out := probeExit(t, bin, httpAddr); code != 0 || out != "" {
		t.Errorf("processor probe of a ready processor: exit %d, %q; want 0 and nothing", code, out)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s, want 200", code, body)
	}
	code, metrics := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	wantInfo := regexp.MustCompile(`(?m)^processor_build_info\{[^}]*version="` + regexp.QuoteMeta(version) + `"[^}]*\} 1$`)
	if !wantInfo.MatchString(metrics) {
		t.Errorf("/metrics has no processor_build_info with version %q", version)
	}
	// Every processor_ metric family served is documented.
	doc := documentedMetrics(t)
	for _, line := range strings.Split(metrics, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			if strings.HasPrefix(name, "processor_") && undocumented(doc, name) {
				t.Errorf("the running processor exports %s, which is not in the metric table of %s", name, operationsFile)
			}
		}
	}

	// SIGTERM: a clean stop, exit 0, within the bound the grace periods
	// are derived from.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	bound := cleanStopBound(40 * time.Second)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("after SIGTERM the processor exited with %v, want exit code 0", err)
		}
	case <-time.After(bound):
		t.Errorf("the processor did not stop within %s of SIGTERM", bound)
	}
}
