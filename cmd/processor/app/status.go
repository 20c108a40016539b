package app

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/streamproc/processor/pipeline"
)

// The status page at / and its data at /status: the same snapshot
// (pipeline.Status), as JSON and as server-rendered HTML that refreshes
// itself, with no script.

//go:embed status.html
var statusHTML string

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"off": func(o int64) string {
		if o < 0 {
			return "–"
		}
		return strconv.FormatInt(o, 10)
	},
}).Parse(statusHTML))

// pageRefresh is how often the page reloads itself, in seconds.
const pageRefresh = 3

// statusHandlers serves /status and the page from snapshot.
type statusHandlers struct {
	snapshot func() pipeline.Status

	mu   sync.Mutex
	last rateSample // the previous page's counters, for rates
}

// rateSample is the counters at one moment.
type rateSample struct {
	at                          time.Time
	commits, consumed, produced uint64
}

func (h *statusHandlers) json(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h.snapshot())
}

// pageData is what the template renders.
type pageData struct {
	S                              pipeline.Status
	Refresh                        int
	TxnPerSec, InPerSec, OutPerSec string
	SinceCommit                    string
	Aborts                         []reasonCount
}

type reasonCount struct {
	Reason string
	N      uint64
}

func (h *statusHandlers) page(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	s := h.snapshot()
	d := pageData{S: s, Refresh: pageRefresh, TxnPerSec: "–", InPerSec: "–", OutPerSec: "–"}
	now := time.Now()
	cur := rateSample{at: now, commits: s.Commits, consumed: s.Consumed, produced: s.Produced}
	h.mu.Lock()
	prev := h.last
	h.last = cur
	h.mu.Unlock()
	if secs := now.Sub(prev.at).Seconds(); !prev.at.IsZero() && secs >= 0.5 {
		rate := func(a, b uint64) string { return strconv.FormatFloat(float64(a-min(a, b))/secs, 'f', 1, 64) }
		d.TxnPerSec, d.InPerSec, d.OutPerSec = rate(cur.commits, prev.commits), rate(cur.consumed, prev.consumed), rate(cur.produced, prev.produced)
	}
	if !s.LastCommit.IsZero() {
		d.SinceCommit = now.Sub(s.LastCommit).Round(100 * time.Millisecond).String()
	}
	for reason, n := range s.Aborts {
		if n > 0 {
			d.Aborts = append(d.Aborts, reasonCount{reason, n})
		}
	}
	slices.SortFunc(d.Aborts, func(a, b reasonCount) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Reason, b.Reason)) })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusPage.Execute(w, d); err != nil {
		http.Error(w, "rendering the status page: "+err.Error(), http.StatusInternalServerError)
	}
}
