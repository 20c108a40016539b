package app

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform"
)

// The test file of docs/running.md passes as the page says, and with the
// program it names changed, fails with the output it shows.
func TestDocsTestCommandExample(t *testing.T) {
	b, err := os.ReadFile("../../../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	section := page[strings.Index(page, "### `processor test`"):]
	blocks := regexp.MustCompile("(?s)```(yaml|)\n(.*?)```").FindAllStringSubmatch(section, 3)
	if len(blocks) < 2 || blocks[0][1] != "yaml" || !strings.HasPrefix(blocks[1][2], "$ processor test cases.yaml\n") {
		t.Fatalf("docs/running.md: want the test file, then the output of processor test cases.yaml")
	}
	run := func(doc string) (string, int) {
		clearProcessorVars(t)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "cases.yaml"), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		var stdout, stderr bytes.Buffer
		code := runTest([]string{"cases.yaml"}, transform.Default, &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	out, code := run(blocks[0][2])
	if code != exitOK || out != "PASS adds the total\nPASS not JSON is a dead letter\nPASS counts per customer in 1m windows\n3 passed, 0 failed\n" {
		t.Errorf("the page's file: exit %d, output:\n%s", code, out)
	}
	changed := strings.Replace(blocks[0][2], ".total = .price * .qty", ".total = .price + .qty", 1)
	out, code = run(changed)
	if want := strings.TrimPrefix(blocks[1][2], "$ processor test cases.yaml\n"); code != exitRuntime || out != want {
		t.Errorf("the changed file: exit %d, output:\n%s\nthe page shows:\n%s", code, out, want)
	}
}
