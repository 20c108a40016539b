package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/streamproc/processor/schema"
)

// environment is where the benchmark's programs are and what they are.
type environment struct {
	root, cache, logs string

	processor, copier, devbroker string
	// baseline is the -baseline processor binary (absolute), run by the
	// systems named with baseSuffix; "" when not given.
	baseline string
	jar      string // the Kafka Streams application; "" if it could not be built
	jarWhy   string // why not
	java     string

	processorVersion, javaVersion, goVersion string
	kstreamsBuild                            string // "cached" or how long the Maven build took

	avail map[string]string // system key -> why it is not available ("" if it is)

	// The Avro rows' registry (startRegistry): its URL, a client, and the
	// output schema file.
	registry string
	reg      schema.Registry
	avroOut  string

	lookup string // the http rows' service (startLookup): its base URL
}

// build runs `make build` (the processor, devbroker, ... with the version
// flags), builds bench/copier, and builds the Kafka Streams jar unless the
// cached one matches bench/kstreams.
func (e *environment) build(ctx context.Context, o options) error {
	t0 := time.Now()
	say("building: make build")
	if err := runQuiet(ctx, e.root, "make", "build"); err != nil {
		return fmt.Errorf("make build: %w", err)
	}
	e.locate(o)
	say("building: go build ./bench/copier")
	if err := runQuiet(ctx, e.root, "go", "build", "-trimpath", "-o", e.copier, "./bench/copier"); err != nil {
		return fmt.Errorf("building bench/copier: %w", err)
	}
	say("built the Go binaries in %.1fs", time.Since(t0).Seconds())
	if slices.ContainsFunc(o.systems, isKStreams) {
		e.buildJar(ctx)
	}
	return nil
}

// versionOf is what the processor binary bin says of its version, or ""
// if it cannot say.
func versionOf(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// locate fills in the paths and versions without building anything.
func (e *environment) locate(o options) {
	e.processor = filepath.Join(e.root, "bin", "processor")
	e.devbroker = filepath.Join(e.root, "bin", "devbroker")
	e.copier = filepath.Join(e.cache, "bin", "copier")
	e.processorVersion = versionOf(e.processor)
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		e.goVersion = strings.TrimSpace(string(out))
	}
	e.java, _ = exec.LookPath("java")
	if e.java != "" {
		if out, err := exec.Command(e.java, "-version").CombinedOutput(); err == nil {
			e.javaVersion, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
		}
	}
	if o.noBuild && slices.ContainsFunc(o.systems, isKStreams) {
		jar := filepath.Join(e.cache, "kstreams", "kstreams-bench.jar")
		if _, err := os.Stat(jar); err == nil {
			e.jar, e.kstreamsBuild = jar, "cached"
		} else {
			e.jarWhy = "the Kafka Streams jar is not built (run without -no-build)"
		}
	}
}

// buildJar builds bench/kstreams with Maven into bench/.cache/kstreams,
// unless the jar there was built from the same pom.xml and sources (a hash
// in bench/.cache/kstreams/stamp). Without java or mvn the Kafka Streams
// rows are "not available".
func (e *environment) buildJar(ctx context.Context) {
	src := filepath.Join(e.root, "bench", "kstreams")
	dir := filepath.Join(e.cache, "kstreams")
	jar := filepath.Join(dir, "kstreams-bench.jar")
	stampFile := filepath.Join(dir, "stamp")
	if e.java == "" {
		e.jarWhy = "no java on PATH (JDK 17+ needed)"
		return
	}
	stamp, err := hashTree(src)
	if err != nil {
		e.jarWhy = "reading bench/kstreams: " + err.Error()
		return
	}
	if old, err := os.ReadFile(stampFile); err == nil && string(old) == stamp {
		if _, err := os.Stat(jar); err == nil {
			e.jar, e.kstreamsBuild = jar, "cached"
			say("Kafka Streams jar: cached (%s)", jar)
			return
		}
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		e.jarWhy = "no mvn on PATH (Maven 3 needed to build bench/kstreams)"
		return
	}
	say("building: mvn package in bench/kstreams (first time: downloads Kafka Streams 4.4.0 and Maven plugins, ~40 s)")
	t0 := time.Now()
	if err := runQuiet(ctx, src, mvn, "-B", "-q", "package"); err != nil {
		e.jarWhy = "the Maven build failed: " + err.Error()
		say("Kafka Streams jar: %s", e.jarWhy)
		return
	}
	if err := os.WriteFile(stampFile, []byte(stamp), 0o644); err != nil {
		e.jarWhy = err.Error()
		return
	}
	e.jar = jar
	e.kstreamsBuild = fmt.Sprintf("built in %.0fs", time.Since(t0).Seconds())
	say("Kafka Streams jar: %s (%s)", e.kstreamsBuild, jar)
}

// hashTree hashes pom.xml and every file under src/ of dir.
func hashTree(dir string) (string, error) {
	h := sha256.New()
	var files []string
	files = append(files, filepath.Join(dir, "pom.xml"))
	err := filepath.WalkDir(filepath.Join(dir, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.Sort(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// runQuiet runs a command in dir; its output is shown only if it fails.
func runQuiet(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Stderr.Write(out.Bytes())
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s %s: exit code %d", name, strings.Join(args, " "), ee.ExitCode())
		}
		return err
	}
	return nil
}
