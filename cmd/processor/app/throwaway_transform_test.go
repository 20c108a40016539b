package app

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docs/design.md says that a transform is one package under transform/
// plus one blank import in transform/all/all.go. This test takes it at
// its word: it writes a transform package of its own in a temporary
// directory under transform/ (one file, registering "throwaway" with a
// declared setting from init), has the go command build
// transform/all/all.go with one more blank import line (an -overlay, so
// the file on disk stays as it is), and runs a test package that imports
// transform/all as cmd/processor does: the processor's reference lists
// the transform with its setting, and the processor itself (Main) runs it
// when PROCESSOR_TRANSFORMS=throwaway, writing each input's value with
// the configured suffix to the output topic.
func TestThrowawayTransformIsOnePackageAndOneImport(t *testing.T) {
	runThrowaway(t, throwaway{
		under: "transform",
		files: map[string]string{
			"throwaway.go":                throwawayTransform,
			"processor/processor_test.go": throwawayTransformTest,
		},
		overlay: func(pkg string) (string, string, error) {
			src, err := os.ReadFile(filepath.Join("..", "..", "..", "transform", "all", "all.go"))
			if err != nil {
				return "", "", err
			}
			// The first line that closes a block closes the imports.
			line := "\t_ " + strconv.Quote(pkg) + " // the one import\n)\n"
			with := strings.Replace(string(src), "\n)\n", "\n"+line, 1)
			if with == string(src) {
				return "", "", errors.New("transform/all/all.go has no import block")
			}
			return filepath.Join("transform", "all", "all.go"), with, nil
		},
		want: []string{"--- PASS: TestListed", "--- PASS: TestSelected"},
	})
}

// throwawayTransform is the transform package: one file, one
// registration, one declared setting.
const throwawayTransform = `// Package throwaway is a transform that a test writes, registers and
// deletes: it appends SUFFIX to every record's value.
package throwaway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

func init() {
	transform.Register("throwaway", transform.Typed("appends SUFFIX to every value", New))
}

// Settings are the transform's settings.
type Settings struct {
	// Suffix is appended to every value.
	Suffix string ` + "`" + `setting:"SUFFIX" default:"!" doc:"what to append to every value" form:"any text"` + "`" + `
}

// New builds the transform.
func New(s *Settings) (transform.Transform, error) {
	suffix := []byte(s.Suffix)
	return transform.Func(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		o := *rec
		o.Value = append(append([]byte(nil), rec.Value...), suffix...)
		return append(out, &o), nil
	}), nil
}
`

// throwawayTransformTest is the test package: it imports the wiring and
// transform/all, as cmd/processor does, and not the transform itself.
const throwawayTransformTest = `package processor_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/all" // the built-in transforms
)

func TestListed(t *testing.T) {
	var b strings.Builder
	app.WriteReference(&b, transform.Default, false)
	for _, want := range []string{"Transform throwaway: appends SUFFIX to every value",
		"PROCESSOR_THROWAWAY_SUFFIX (default !)", "what to append to every value"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("processor config does not say %q", want)
		}
	}
}

func TestSelected(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out"))
	var recs []*kgo.Record
	var want []string
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: "in", Value: []byte(strconv.Itoa(i))})
		want = append(want, strconv.Itoa(i)+"+t")
	}
	c.ProduceSync(t, recs)
	for k, v := range map[string]string{"BROKERS": c.Brokers[0], "GROUP": "g", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out",
		"TRANSFORMS": "throwaway", "THROWAWAY_SUFFIX": "+t", "HTTP_ADDR": "127.0.0.1:0", "STATE_DIR": t.TempDir(), "LOG_LEVEL": "warn"} {
		t.Setenv("PROCESSOR_"+k, v)
	}
	os.Args = []string{"processor"}
	code := make(chan int, 1)
	go func() { code <- app.Main(transform.Default) }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if ok, _ := c.CaughtUp(t, "g", "in"); ok {
			break
		}
		select {
		case got := <-code:
			t.Fatalf("Main = %d before it committed the ends of 100 inputs", got)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the processor did not commit the ends of 100 inputs in a minute")
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-code; got != 0 {
		t.Errorf("Main = %d, want 0", got)
	}
	var got []string
	for _, r := range c.ReadAll(t, "out", true) {
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the output topic holds %q, want each input with the suffix once, %q", got, want)
	}
}
`
