package binaries

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/chromedp/chromedp"

	"github.com/streamproc/processor/internal/launch"
)

// Deadlines of the status page test's browser: each one fails the test
// with a message instead of hanging.
const (
	browserStartTimeout  = 20 * time.Second // Chromium to start and answer
	browserActionTimeout = 10 * time.Second // one navigation, evaluation or screenshot
	browserTotalTimeout  = 45 * time.Second // the browser's whole life; killed then
	browserStopTimeout   = 15 * time.Second // the browser to exit when the test ends
)

// The status page in a real browser: headless Chromium loads / from the
// processor binary on its embedded broker, once it has committed loadgen's
// records and is idle. The table #partitions is visible, has a row per
// assigned partition of /status, and shows /status's offsets; a screenshot
// of the page really shows the table; the page reloads itself (meta
// refresh), showing new positions while loadgen writes; and its charts are
// drawn, end on /status's samples, under a strict Content-Security-Policy
// with nothing loaded from elsewhere (checkStatusPageCharts).
func TestStatusPage(t *testing.T) {
	chromium := findChromium(t)
	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }

	const (
		partitions = 3
		records    = 2000
	)
	broker, httpAddr := itest.FreeAddr(t), itest.FreeAddr(t)
	itest.RunBinary(t, "processor", launch.Instance{
		EmbeddedBroker:           broker,
		EmbeddedBrokerDir:        t.TempDir(),
		EmbeddedBrokerPartitions: partitions,
		Group:                    "status-page",
		TransactionalID:          "status-page-1",
		InputTopics:              []string{"orders"},
		OutputTopic:              "orders-out",
		HTTPAddr:                 httpAddr,
		LogFormat:                "text",
	})
	base := "http://" + httpAddr
	itest.WaitFor(t, 30*time.Second, "/readyz to answer 200", func() bool { code, _ := itest.HTTPGet(httpAddr, "/readyz"); return code == 200 })

	t.Logf("processor ready after %s", since())
	runLoadgen(t, broker, "-records", strconv.Itoa(records), "-rate", "0")

	// Idle and caught up: every record committed, no transaction open,
	// every partition's position, committed offset and end offsets equal,
	// and the same in two reads, so the page and /status must agree.
	var last statusPageStatus
	itest.WaitFor(t, 30*time.Second, fmt.Sprintf("/status to show %d records committed on %d idle partitions", records, partitions), func() bool {
		s, err := fetchStatusPage(base)
		if err != nil {
			return false
		}
		prev := last
		last = s
		return s.idle(records, partitions) && reflect.DeepEqual(prev.Partitions, s.Partitions)
	})

	t.Logf("%d records committed, processor idle after %s", records, since())
	ctx := startBrowser(t, chromium)
	t.Logf("Chromium started after %s", since())

	// The partition table, compared with /status read before and after
	// the page. Both reads are of an idle processor, but allow a change
	// (a retry) rather than fail on a coincidence.
	var page pageState
	var before, after statusPageStatus
	for attempt := 1; ; attempt++ {
		var err error
		if before, err = fetchStatusPage(base); err != nil {
			t.Fatalf("/status: %v", err)
		}
		browse(t, ctx, "loading "+base+"/", chromedp.Navigate(base+"/"))
		browse(t, ctx, "waiting for the table #partitions to be visible", chromedp.WaitVisible(chromedp.ID("partitions")))
		page = readPage(t, ctx)
		if after, err = fetchStatusPage(base); err != nil {
			t.Fatalf("/status: %v", err)
		}
		stable := reflect.DeepEqual(before.Partitions, after.Partitions)
		if (stable && page.matches(before.Partitions) == nil) || attempt == 3 {
			break
		}
		t.Logf("attempt %d: /status changed while the page was read, or the page differs; again", attempt)
		time.Sleep(500 * time.Millisecond)
	}

	// The screenshot first, so that a failure below can be looked at.
	shot := browse(t, ctx, "taking a screenshot of the page", chromedp.FullScreenshot(100))
	img := saveStatusPageScreenshot(t, "statuspage.png", shot)

	if !page.Visible {
		t.Errorf("the table #partitions is not visible: box %+v, page %+v", page.Box, page)
	}
	if len(page.Rows) != len(before.Partitions) {
		t.Errorf("the table has %d partition rows, /status has %d partitions: rows %q", len(page.Rows), len(before.Partitions), page.cells())
	}
	if err := page.matches(before.Partitions); err != nil {
		t.Errorf("the table does not show /status's partitions: %v\n/status before: %+v\n/status after:  %+v\npage: %q", err, before.Partitions, after.Partitions, page.cells())
	}
	checkStatusPageScreenshot(t, img, page)

	// The page refreshes itself: a new document (the mark set in this one
	// is gone) that shows the positions loadgen's new records moved.
	refresh, err := strconv.Atoi(strings.TrimSpace(page.Refresh))
	if err != nil || refresh < 1 || refresh > 10 {
		t.Fatalf(`the page has no usable <meta http-equiv="refresh">: content %q`, page.Refresh)
	}
	startPositions := page.positionSum()
	browse(t, ctx, "marking the loaded document", chromedp.Evaluate[chromedp.Void](`window.statusPageTestMark = true`))
	// loadgen writes until the test ends (it is killed then): the charts
	// below are read while it writes, however long the reloads take.
	startStatusPageLoadgen(t, broker, "-records", "1000000", "-rate", "400")
	deadline := time.Now().Add(time.Duration(3*refresh+6) * time.Second)
	reloads, lastReload := 0, time.Now()
	for {
		p, err := tryReadPage(ctx)
		switch {
		case err != nil:
			// Between two documents: the old one's context is gone.
		case p.Ready == "loading":
			// A new document, not parsed yet.
		case !p.Mark:
			reloads++
			t.Logf("the page reloaded itself after %s: positions %d (were %d): %q", time.Since(lastReload).Round(100*time.Millisecond), p.positionSum(), startPositions, p.cells())
			lastReload = time.Now()
			if p.positionSum() > startPositions {
				t.Logf("reloaded with new positions after %s", since())
				// The charts, while loadgen still writes.
				checkStatusPageCharts(t, ctx, base)
				t.Logf("done after %s", since())
				return
			}
			// An error here is a document that is being replaced already: the
			// next read sees the new one unmarked.
			mctx, cancel := context.WithTimeout(ctx, browserActionTimeout)
			_ = chromedp.Do(mctx, chromedp.Evaluate[chromedp.Void](`window.statusPageTestMark = true`))
			cancel()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not reload itself with new positions within %ds (meta refresh %ds): %d reloads seen, positions %d at the start",
				3*refresh+6, refresh, reloads, startPositions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// findChromium returns the path of Chromium, or skips the test without it;
// in CI (CI set) its absence fails the test.
func findChromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("headless Chromium not found (%v): CI must install the Debian package chromium (apt-get install chromium)", err)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// startBrowser starts headless Chromium and returns its context, with the
// deadline browserTotalTimeout. The browser is stopped, and waited for, when
// the test ends.
func startBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	output := &itest.SyncBuffer{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // Chromium as root (CI, containers) needs it
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(output),
	)
	total, cancelTotal := context.WithTimeout(context.Background(), browserTotalTimeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(total, opts...)
	logf := func(format string, args ...any) { fmt.Fprintf(output, "chromedp: "+format+"\n", args...) }
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithErrorf(logf))
	t.Cleanup(func() {
		var pid int
		if c := chromedp.FromContext(ctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
			pid = c.Browser.Process().Pid
		}
		stopped := make(chan struct{})
		go func() {
			cancelCtx()   // closes the tab and the browser
			cancelAlloc() // and waits for its processes to exit
			cancelTotal()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(browserStopTimeout):
			t.Errorf("Chromium (pid %d) did not exit within %s of the end of the test; killing it", pid, browserStopTimeout)
			if pid > 0 {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
		if t.Failed() {
			t.Logf("Chromium's output and chromedp's errors:\n%s", output.String())
		}
	})

	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }() // starts the browser
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting Chromium (%s): %v\n%s", chromium, err, output.String())
		}
	case <-time.After(browserStartTimeout):
		t.Fatalf("Chromium (%s) did not start within %s\n%s", chromium, browserStartTimeout, output.String())
	}
	return ctx
}

// browse runs one browser action within browserActionTimeout, failing the
// test with what it was doing.
func browse[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, browserActionTimeout)
	defer cancel()
	v, err := chromedp.Run(actx, a)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("browser: %s: not done within %s: %v", what, browserActionTimeout, err)
		}
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// runLoadgen writes records to the topic orders with loadgen and waits for
// it.
func runLoadgen(t *testing.T, broker string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), itest.LoadgenTimeout)
	defer cancel()
	lg := exec.CommandContext(ctx, filepath.Join(itest.BinDir, "loadgen"), append([]string{"-brokers", broker, "-topic", "orders"}, args...)...)
	lg.WaitDelay = 5 * time.Second
	out, err := lg.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("loadgen did not finish within %s, killed: %v\n%s", itest.LoadgenTimeout, err, out)
	}
	if err != nil {
		t.Fatalf("loadgen: %v\n%s", err, out)
	}
}

// startStatusPageLoadgen starts loadgen writing to the topic orders; it is
// stopped and waited for when the test ends, if it has not finished.
func startStatusPageLoadgen(t *testing.T, broker string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lg := exec.CommandContext(ctx, filepath.Join(itest.BinDir, "loadgen"), append([]string{"-brokers", broker, "-topic", "orders"}, args...)...)
	lg.WaitDelay = 5 * time.Second
	out := &itest.SyncBuffer{}
	lg.Stdout, lg.Stderr = out, out
	if err := lg.Start(); err != nil {
		cancel()
		t.Fatalf("loadgen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- lg.Wait() }()
	t.Cleanup(func() {
		cancel() // kills it if still running
		select {
		case <-done:
		case <-time.After(itest.BinaryKillTimeout):
			t.Errorf("loadgen did not exit within %s of SIGKILL", itest.BinaryKillTimeout)
		}
		if t.Failed() {
			t.Logf("loadgen's output:\n%s", out.String())
		}
	})
}

// statusPageStatus is the part of /status this test reads.
type statusPageStatus struct {
	Ready           bool                  `json:"ready"`
	Consumed        uint64                `json:"records_consumed"`
	Lag             int64                 `json:"lag"`
	OpenTransaction *json.RawMessage      `json:"open_transaction"`
	Partitions      []statusPagePartition `json:"partitions"`
}

type statusPagePartition struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Position   int64  `json:"position"`
	Committed  int64  `json:"committed"`
	LogEnd     int64  `json:"log_end"`
	LastStable int64  `json:"last_stable"`
	Lag        int64  `json:"lag"`
	Unstable   int64  `json:"unstable"`
}

func fetchStatusPage(base string) (statusPageStatus, error) {
	var s statusPageStatus
	resp, err := itest.BinaryHTTP.Get(base + "/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return s, fmt.Errorf("/status answered %s", resp.Status)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// idle reports whether the processor has committed records records on its
// partitions partitions and holds no open transaction.
func (s statusPageStatus) idle(records uint64, partitions int) bool {
	if !s.Ready || s.Consumed != records || s.Lag != 0 || s.OpenTransaction != nil || len(s.Partitions) != partitions {
		return false
	}
	var end int64
	for _, p := range s.Partitions {
		if p.Committed < 0 || p.Position != p.Committed || p.LogEnd != p.Committed || p.LastStable != p.Committed {
			return false
		}
		end += p.LogEnd
	}
	return end == int64(records)
}

// pageState is what the browser shows of the status page.
type pageState struct {
	Visible bool     `json:"visible"`
	Box     pageBox  `json:"box"`
	Header  []string `json:"header"`
	Rows    []struct {
		Cells []string `json:"cells"`
		Box   pageBox  `json:"box"`
	} `json:"rows"`
	Refresh string  `json:"refresh"` // the meta refresh's content
	Mark    bool    `json:"mark"`    // window.statusPageTestMark
	Ready   string  `json:"ready"`   // document.readyState
	DPR     float64 `json:"dpr"`
	Width   float64 `json:"width"` // of the viewport, CSS pixels
}

// pageBox is an element's border box in CSS pixels, from the document's top
// left corner.
type pageBox struct{ X, Y, W, H float64 }

// readPageJS reads the page in one evaluation, so in one document even
// while the page reloads itself.
const readPageJS = `(() => {
	const t = document.getElementById("partitions");
	const meta = document.querySelector('meta[http-equiv="refresh" i]');
	const box = e => { const b = e.getBoundingClientRect(); return {X: b.left + scrollX, Y: b.top + scrollY, W: b.width, H: b.height}; };
	const r = {ready: document.readyState, header: [], refresh: meta ? meta.content : "", mark: window.statusPageTestMark === true, dpr: devicePixelRatio, width: innerWidth, rows: []};
	if (!t) return JSON.stringify(r);
	const s = getComputedStyle(t), b = t.getBoundingClientRect();
	const hit = document.elementFromPoint(b.left + b.width / 2, b.top + Math.min(b.height, innerHeight - b.top) / 2);
	r.visible = s.display !== "none" && s.visibility === "visible" && Number(s.opacity) > 0 && b.width > 0 && b.height > 0 &&
		b.top < innerHeight && b.left < innerWidth && hit !== null && t.contains(hit);
	r.box = box(t);
	const rows = [...t.rows];
	r.header = rows.length ? [...rows[0].cells].map(c => c.innerText.trim()) : [];
	r.rows = rows.slice(1).map(tr => ({cells: [...tr.cells].map(c => c.innerText.trim()), box: box(tr)}));
	return JSON.stringify(r);
})()`

func tryReadPage(ctx context.Context) (pageState, error) {
	var p pageState
	actx, cancel := context.WithTimeout(ctx, browserActionTimeout)
	defer cancel()
	s, err := chromedp.Run(actx, chromedp.Evaluate[string](readPageJS))
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal([]byte(s), &p)
}

func readPage(t *testing.T, ctx context.Context) pageState {
	t.Helper()
	var p pageState
	var err error
	for range 3 { // the page may be between two documents of its refresh
		if p, err = tryReadPage(ctx); err == nil && len(p.Header) > 0 {
			return p
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("browser: reading the status page: %v", err)
	}
	t.Fatal("browser: the status page has no table #partitions")
	return p
}

func (p pageState) cells() [][]string {
	var c [][]string
	for _, r := range p.Rows {
		c = append(c, r.Cells)
	}
	return c
}

// column is the index of the header named name, or -1.
func (p pageState) column(name string) int {
	for i, h := range p.Header {
		if strings.EqualFold(h, name) {
			return i
		}
	}
	return -1
}

// pageOffset is how the page shows an offset: "–" when not known.
func pageOffset(o int64) string {
	if o < 0 {
		return "–"
	}
	return strconv.FormatInt(o, 10)
}

// matches reports how the table differs from partitions, row by row, by
// the columns' headers.
func (p pageState) matches(partitions []statusPagePartition) error {
	if len(p.Rows) != len(partitions) {
		return fmt.Errorf("%d rows, want %d", len(p.Rows), len(partitions))
	}
	var diffs []string
	for i, ps := range partitions {
		want := map[string]string{
			"topic": ps.Topic, "partition": strconv.Itoa(int(ps.Partition)),
			"position": pageOffset(ps.Position), "committed": pageOffset(ps.Committed),
			"log end": pageOffset(ps.LogEnd), "last stable": pageOffset(ps.LastStable),
			"lag": strconv.FormatInt(ps.Lag, 10), "unstable": strconv.FormatInt(ps.Unstable, 10),
		}
		for _, name := range []string{"topic", "partition", "position", "committed", "log end", "last stable", "lag", "unstable"} {
			c := p.column(name)
			if c < 0 {
				return fmt.Errorf("no column %q in the header %q", name, p.Header)
			}
			if c >= len(p.Rows[i].Cells) {
				diffs = append(diffs, fmt.Sprintf("row %d has no %s cell", i+1, name))
			} else if got := p.Rows[i].Cells[c]; got != want[name] {
				diffs = append(diffs, fmt.Sprintf("row %d (%s/%d) %s = %q, /status %q", i+1, ps.Topic, ps.Partition, name, got, want[name]))
			}
		}
	}
	if diffs != nil {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

// positionSum is the sum of the table's positions.
func (p pageState) positionSum() int64 {
	c := p.column("position")
	var sum int64
	for _, r := range p.Rows {
		if c >= 0 && c < len(r.Cells) {
			n, _ := strconv.ParseInt(r.Cells[c], 10, 64)
			sum += n
		}
	}
	return sum
}

// saveStatusPageScreenshot decodes the PNG shot, saves it as name in the test's
// temporary directory and, when PROCESSOR_TEST_ARTIFACTS is set, there too.
func saveStatusPageScreenshot(t *testing.T, name string, shot []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot (%d bytes) is no PNG: %v", len(shot), err)
	}
	writeStatusPageArtifact(t, name, shot)
	return img
}

func writeStatusPageArtifact(t *testing.T, name string, data []byte) {
	t.Helper()
	dirs := []string{t.TempDir()}
	if d := os.Getenv("PROCESSOR_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Errorf("PROCESSOR_TEST_ARTIFACTS: %v", err)
		} else {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		path := filepath.Join(d, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Errorf("saving %s: %v", path, err)
			continue
		}
		t.Logf("saved %s", path)
	}
}

// Dark enough to be text: the page's text is #222 on white or #f3f3f3;
// its borders (#ddd) are not dark.
const statusPageDarkLuma = 110

// checkStatusPageScreenshot checks that the screenshot shows the table: the image
// holds the table's box, and the header and every row have text drawn in
// it. It saves the table's part of the image.
func checkStatusPageScreenshot(t *testing.T, img image.Image, p pageState) {
	t.Helper()
	b := img.Bounds()
	scale := p.DPR
	if scale <= 0 {
		scale = 1
	}
	if want := int(p.Width*scale + 0.5); b.Dx() < want-2 || b.Dx() > want+2 || b.Dy() < 200 {
		t.Errorf("the screenshot is %dx%d, want %d (the viewport) wide and at least 200 high", b.Dx(), b.Dy(), want)
	}
	rect := func(bx pageBox) image.Rectangle {
		return image.Rect(int(bx.X*scale), int(bx.Y*scale), int((bx.X+bx.W)*scale+0.5), int((bx.Y+bx.H)*scale+0.5))
	}
	table := rect(p.Box)
	if !table.In(b) || table.Empty() {
		t.Errorf("the table's box %v is not inside the %v screenshot", table, b)
		return
	}
	// The table alone, to look at.
	var crop bytes.Buffer
	if sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	}); ok {
		if err := png.Encode(&crop, sub.SubImage(table)); err == nil {
			writeStatusPageArtifact(t, "statuspage-partitions.png", crop.Bytes())
		}
	}

	dark := func(r image.Rectangle) int {
		n := 0
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				cr, cg, cb, _ := img.At(x, y).RGBA()
				if luma := (299*cr + 587*cg + 114*cb) / 1000 >> 8; luma < statusPageDarkLuma {
					n++
				}
			}
		}
		return n
	}
	// Text in each row: the header's eight words, a row's topic and
	// numbers. A blank or unpainted table has none.
	total := dark(table)
	headerBand := image.Rect(table.Min.X, table.Min.Y, table.Max.X, table.Min.Y+1)
	if len(p.Rows) > 0 {
		headerBand.Max.Y = rect(p.Rows[0].Box).Min.Y
	}
	if n := dark(headerBand.Intersect(b)); n < 100 {
		t.Errorf("the screenshot's table header %v has %d dark pixels, want at least 100 (text drawn)", headerBand, n)
	}
	for i, r := range p.Rows {
		band := rect(r.Box).Intersect(b)
		if n := dark(band); n < 40 {
			t.Errorf("the screenshot's table row %d %v (%q) has %d dark pixels, want at least 40 (text drawn)", i+1, band, r.Cells, n)
		}
	}
	t.Logf("screenshot %dx%d; table %v: %d dark pixels", b.Dx(), b.Dy(), table, total)
}

// statusPageChart is what the browser shows of one of the page's charts.
type statusPageChart struct {
	ID  string  `json:"id"`
	W   float64 `json:"w"` // rendered size, CSS pixels
	H   float64 `json:"h"`
	Max float64 `json:"max"` // data-max: the value at the plot's top
	// The plot's top and bottom in the viewBox (data-plot-top, -bottom).
	Top, Bottom float64
	ViewW       float64 `json:"viewW"` // the viewBox's width
	Lines       []struct {
		Series string  `json:"series"`
		Last   float64 `json:"last"`   // data-last
		LastAt string  `json:"lastAt"` // data-last-at
		Points int     `json:"points"`
		X, Y   float64 // the last point, in the viewBox
	} `json:"lines"`
}

// statusPageChartsJS reads the charts, what the page loaded, and its
// external references, in one evaluation.
const statusPageChartsJS = `(() => {
	const charts = [...document.querySelectorAll("svg.chart")].map(svg => {
		const b = svg.getBoundingClientRect();
		return {id: svg.id, w: b.width, h: b.height, max: Number(svg.dataset.max), viewW: svg.viewBox.baseVal.width,
			Top: Number(svg.dataset.plotTop), Bottom: Number(svg.dataset.plotBottom),
			lines: [...svg.querySelectorAll("polyline")].map(pl => {
				const n = pl.points.numberOfItems, p = n ? pl.points.getItem(n - 1) : {x: NaN, y: NaN};
				return {series: pl.dataset.series, last: Number(pl.dataset.last), lastAt: pl.dataset.lastAt, points: n, X: p.x, Y: p.y};
			})};
	});
	const external = [...document.querySelectorAll("[src], link[href], [srcset]")].map(e => e.outerHTML.slice(0, 120));
	return JSON.stringify({charts, external, resources: performance.getEntriesByType("resource").map(r => r.name), ready: document.readyState});
})()`

// statusPageChartSeries names the /status sample field each chart's
// line draws.
var statusPageChartSeries = map[string]map[string]string{
	"chart-records":     {"in": "records_in_per_second", "out": "records_out_per_second"},
	"chart-txns":        {"commits": "commits_per_second", "aborts": "aborts_per_second"},
	"chart-lag":         {"lag": "lag"},
	"chart-lag-seconds": {"lag": "lag_seconds"},
	"chart-latency":     {"p50": "latency_p50_seconds", "p99": "latency_p99_seconds"},
}

// checkStatusPageCharts checks the page's charts while records flow: the
// page is served with a strict Content-Security-Policy and under 200 KB;
// in the browser it loads nothing (no resource, no external reference);
// every chart is drawn with points, its last point at the plot's right
// edge at the height of its value, and that value is /status's sample of
// the same moment; the records-in chart's last point is above 0.
func checkStatusPageCharts(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	resp, err := itest.BinaryHTTP.Get(base + "/")
	if err != nil {
		t.Fatalf("GET /: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("Content-Security-Policy %q: want default-src 'none' and no script", csp)
	}
	if len(body) > 200_000 {
		t.Errorf("the page is %d bytes, want at most 200 KB", len(body))
	}

	var got struct {
		Charts    []statusPageChart `json:"charts"`
		External  []string          `json:"external"`
		Resources []string          `json:"resources"`
		Ready     string            `json:"ready"`
	}
	for attempt := 1; ; attempt++ {
		browse(t, ctx, "loading "+base+"/ for the charts", chromedp.Navigate(base+"/"))
		browse(t, ctx, "waiting for the charts", chromedp.WaitVisible(chromedp.ID("chart-records")))
		s := browse(t, ctx, "reading the charts", chromedp.Evaluate[string](statusPageChartsJS))
		if err := json.Unmarshal([]byte(s), &got); err != nil {
			t.Fatalf("reading the charts: %v", err)
		}
		if inAboveZero(got.Charts) || attempt == 5 {
			break
		}
		time.Sleep(time.Second) // a sample with records in
	}
	if len(got.External) > 0 || len(got.Resources) > 0 {
		t.Errorf("the page references or loaded something: %q, resources %q", got.External, got.Resources)
	}
	if len(got.Charts) != len(statusPageChartSeries) {
		t.Fatalf("%d charts, want %d: %+v", len(got.Charts), len(statusPageChartSeries), got.Charts)
	}
	if !inAboveZero(got.Charts) {
		t.Errorf("the records-in chart ends at 0 while loadgen writes: %+v", got.Charts[0])
	}
	samples := fetchStatusPageSamples(t, base)
	for _, c := range got.Charts {
		fields := statusPageChartSeries[c.ID]
		if c.W <= 0 || c.H <= 0 || len(c.Lines) != len(fields) {
			t.Errorf("chart %s: %vx%v px, %d lines (want %d)", c.ID, c.W, c.H, len(c.Lines), len(fields))
			continue
		}
		for _, l := range c.Lines {
			sample, ok := samples[l.LastAt]
			field := fields[l.Series]
			switch {
			case l.Points < 2:
				t.Errorf("chart %s, %s: %d points", c.ID, l.Series, l.Points)
			case !ok || field == "":
				t.Errorf("chart %s, %s: its last point (at %s) is no sample of /status's history", c.ID, l.Series, l.LastAt)
			case sample[field] != l.Last:
				t.Errorf("chart %s, %s: last point %v, /status's sample at %s has %s %v", c.ID, l.Series, l.Last, l.LastAt, field, sample[field])
			}
			// The point itself: at the right edge, at the value's height.
			want := c.Bottom - (c.Bottom-c.Top)*l.Last/c.Max
			if l.X < c.ViewW-5 || l.Y < want-1 || l.Y > want+1 {
				t.Errorf("chart %s, %s: last point at (%v, %v), want the right edge at y %v (value %v of %v)", c.ID, l.Series, l.X, l.Y, want, l.Last, c.Max)
			}
		}
	}
	t.Logf("charts: %+v", got.Charts)
}

func inAboveZero(cs []statusPageChart) bool {
	return len(cs) > 0 && cs[0].ID == "chart-records" && len(cs[0].Lines) > 0 && cs[0].Lines[0].Last > 0
}

// fetchStatusPageSamples returns /status's history by the time of each
// sample, in the charts' format (RFC 3339 in UTC, nanoseconds).
func fetchStatusPageSamples(t *testing.T, base string) map[string]map[string]float64 {
	t.Helper()
	resp, err := itest.BinaryHTTP.Get(base + "/status?since=2m")
	if err != nil {
		t.Fatalf("/status: %v", err)
	}
	defer resp.Body.Close()
	var doc struct {
		History []map[string]any `json:"history"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("/status: %v", err)
	}
	out := map[string]map[string]float64{}
	for _, s := range doc.History {
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s["at"]))
		if err != nil {
			t.Fatalf("/status: a sample's at %v: %v", s["at"], err)
		}
		v := map[string]float64{}
		for k, x := range s {
			if f, ok := x.(float64); ok {
				v[k] = f
			}
		}
		out[at.UTC().Format(time.RFC3339Nano)] = v
	}
	if len(doc.History) == 0 {
		t.Fatal("/status has no history")
	}
	return out
}
