package app

import (
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docs/design.md says that a sink is one package plus one import. This
// test takes it at its word: it writes a sink package of its own in a
// temporary directory of the module (one file, registering "throwaway"
// from init) and a test package that imports it once, beside the
// processor's wiring, and runs that package's tests with the go command:
// the sink passes sinktest.Run opened from the registry, the processor's
// reference lists it among PROCESSOR_SINK's values with its setting, and
// the processor itself (Main) runs on it when PROCESSOR_SINK=throwaway,
// writing every input record once and storing the offsets at the inputs'
// end. Nothing else of the module is touched.
func TestThrowawaySinkIsOnePackageAndOneImport(t *testing.T) {
	runThrowaway(t, throwaway{
		files: map[string]string{
			"throwaway/throwaway.go":      throwawaySink,
			"processor/processor_test.go": throwawayTest,
		},
		want: []string{"--- PASS: TestConformance/AllOrNothing", "--- PASS: TestListed", "--- PASS: TestSelected"},
	})
}

// throwaway is a package a test writes in a temporary directory of the
// module, and how the go command tests it.
type throwaway struct {
	// under is the module's directory the temporary one goes in ("" for
	// the module's root).
	under string
	// files are the package's files by their path in the temporary
	// directory; IMPORT_PATH in them stands for the directory's import
	// path. The go command tests the package in its processor
	// subdirectory.
	files map[string]string
	// overlay, when set, returns a file of the module (by its path from
	// the module's root) and the text the go command builds in its place,
	// given the temporary directory's import path.
	overlay func(pkg string) (file, text string, err error)
	// want are lines the test's verbose output must hold.
	want []string
}

// runThrowaway writes tw's package, tests it with the go command (none
// of the processor's variables set) and checks the output holds tw.want.
// A leading underscore keeps a leftover directory out of ./... .
func runThrowaway(t *testing.T, tw throwaway) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, tw.under), "_throwaway-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	pkg := "github.com/streamproc/processor/" + filepath.ToSlash(rel)
	for name, src := range tw.files {
		if err := writeThrowawayFile(filepath.Join(dir, name), strings.ReplaceAll(src, "IMPORT_PATH", pkg)); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"test", "-count=1", "-v"}
	if tw.overlay != nil {
		file, text, err := tw.overlay(pkg)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "-overlay="+overlayFile(t, filepath.Join(root, file), text))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(args, "./"+filepath.ToSlash(rel)+"/processor")...)
	cmd.Dir = root
	for _, kv := range os.Environ() { // the processor's variables are the test's own
		if !strings.HasPrefix(kv, "PROCESSOR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test of a throwaway package: %v\n%s", err, out)
	}
	for _, want := range tw.want {
		if !strings.Contains(string(out), want) {
			t.Errorf("go test of a throwaway package: no %q in\n%s", want, out)
		}
	}
}

// writeThrowawayFile writes src at path, making its directory.
func writeThrowawayFile(path, src string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(src), 0o644)
}

// overlayFile writes an overlay for the go command, building text in
// place of file (an absolute path), outside the module, and returns the
// overlay's path.
func overlayFile(t *testing.T, file, text string) string {
	t.Helper()
	dir := t.TempDir()
	replacement := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(replacement, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]map[string]string{"Replace": {file: replacement}})
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay
}

// throwawaySink is the sink package: one file, one registration.
const throwawaySink = `// Package throwaway is a sink that a test writes, registers and deletes.
package throwaway

import (
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/sink/sinktest"
)

// Stores are the sink's stores, for its tests to look into.
var Stores = &sinktest.Stores{}

func init() {
	spec := sinktest.Spec(Stores)
	spec.Doc = "rows and offsets kept by a test"
	sink.Register("throwaway", spec)
}
`

// throwawayTest is the test package: the wiring, and the sink's one
// import.
const throwawayTest = `package processor_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/sink/sinktest"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/identity"

	"IMPORT_PATH/throwaway" // the one import
)

func TestConformance(t *testing.T) {
	spec, ok := sink.Default.Lookup("throwaway")
	if !ok {
		t.Fatal("throwaway is not registered")
	}
	sinktest.Run(t, func(t testing.TB) sinktest.Target {
		s := spec.Settings()
		if err := settings.Fill(spec.Fields(), s, func(string) (string, bool) { return t.Name(), true }); err != nil {
			t.Fatal(err)
		}
		dest, closeDest, err := spec.Open(context.Background(), s, sink.Host{Group: "g"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeDest)
		m := throwaway.Stores.Get(t.Name())
		refused := []byte("refused")
		m.RefuseValue(refused)
		return sinktest.Target{Sink: dest, Refused: refused, Written: func(context.Context) ([]sink.Row, []sink.DeadLetter, error) {
			return m.Rows(), m.DeadLetters(), nil
		}}
	})
}

func TestListed(t *testing.T) {
	var b strings.Builder
	app.WriteReference(&b, transform.Default, false)
	for _, want := range []string{"values: kafka or postgres or throwaway", "; throwaway: rows and offsets kept by a test",
		"Sink throwaway: rows and offsets kept by a test", "PROCESSOR_THROWAWAY_STORE (default default)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("processor config does not say %q", want)
		}
	}
}

func TestSelected(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: "in", Value: []byte(strconv.Itoa(i))})
	}
	produced := c.ProduceSync(t, recs)
	for k, v := range map[string]string{"BROKERS": c.Brokers[0], "GROUP": "g", "INPUT_TOPICS": "in", "SINK": "throwaway",
		"THROWAWAY_STORE": "selected", "HTTP_ADDR": "127.0.0.1:0", "STATE_DIR": t.TempDir(), "LOG_LEVEL": "warn"} {
		t.Setenv("PROCESSOR_"+k, v)
	}
	os.Args = []string{"processor"}
	code := make(chan int, 1)
	go func() { code <- app.Main(transform.Default) }()
	m := throwaway.Stores.Get("selected")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		stored, _ := m.Offsets(context.Background(), nil)
		if stored[record.TopicPartition{Topic: "in", Partition: 0}]+stored[record.TopicPartition{Topic: "in", Partition: 1}] == 100 {
			break
		}
		select {
		case got := <-code:
			t.Fatalf("Main = %d before it stored the ends of 100 inputs (%v)", got, stored)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the processor stored %v after a minute, want the ends of 100 inputs", stored)
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-code; got != 0 {
		t.Errorf("Main = %d, want 0", got)
	}
	seen := map[record.Source]string{}
	for _, r := range m.Rows() {
		seen[r.Source()] = string(r.Value)
	}
	for _, r := range produced {
		if v, ok := seen[record.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}]; !ok || v != string(r.Value) {
			t.Errorf("input %s/%d@%d: row %q (%v), want %q", r.Topic, r.Partition, r.Offset, v, ok, r.Value)
		}
	}
	if len(m.Rows()) != len(produced) {
		t.Errorf("%d rows, want one per input, %d", len(m.Rows()), len(produced))
	}
}
`

// The wiring names a sink package in sinks.go alone, with a blank import
// (registration is all it needs): every other file reaches sinks through
// the registry. A sink package is one of the module whose code calls
// sink.Register.
func TestOnlySinksGoImportsSinks(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	sinks := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
			return filepath.SkipDir // what the go command leaves out
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(src), "sink.Register(") && filepath.Dir(path) != filepath.Join(root, "sink") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			sinks["github.com/streamproc/processor/"+filepath.ToSlash(rel)] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sinks["github.com/streamproc/processor/pgsink"] {
		t.Fatalf("found the sink packages %v, without pgsink", sinks)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !sinks[path] {
				continue
			}
			if name != "sinks.go" || imp.Name == nil || imp.Name.Name != "_" {
				t.Errorf("%s imports the sink package %s; only sinks.go may, with a blank import", name, path)
			}
		}
	}
}
