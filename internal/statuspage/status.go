// Package statuspage is the processor's status page at / and its data at
// /status, with the charts drawn on the page and the history sampler they
// read: what an operator looks at, kept apart from the wiring that starts
// the processor. It reads only pipeline.Status snapshots.
package statuspage

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/streamproc/processor/pipeline"
)

// The status page at / and its data at /status: the same snapshot
// (pipeline.Status) and the same history (the sampler's), as JSON and as
// server-rendered HTML with inline SVG charts that refreshes itself, with
// no script and nothing loaded from elsewhere.

//go:embed status.html
var statusHTML string

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"off": func(o int64) string {
		if o < 0 {
			return "–"
		}
		return strconv.FormatInt(o, 10)
	},
	"short": short,
}).Parse(statusHTML))

// pageRefresh is how often the page reloads itself, in seconds.
const pageRefresh = 3

// pageRows is how many partitions the page lists unless asked for all
// (?partitions=all): those with the most lag.
const pageRows = 20

// pageCSP is the status page's Content-Security-Policy: nothing but its
// own inline style and inline SVG; no script, no request elsewhere.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Info is what /status says about the instance beyond the
// pipeline's snapshot.
type Info struct {
	Version     string    `json:"version"`
	StartedAt   time.Time `json:"started_at"`
	InputTopics []string  `json:"input_topics"`
	OutputTopic string    `json:"output_topic"`
	DLQTopic    string    `json:"dlq_topic"` // "" without one
	// Formats are the key and value formats in and out (PROCESSOR_*_FORMAT),
	// e.g. {"value": "avro", "output_value": "avro"}; raw ones left out.
	Formats       map[string]string `json:"formats,omitempty"`
	UptimeSeconds float64           `json:"uptime_seconds"`
}

// statusHandlers serves /status and the page from snapshot and hist.
type statusHandlers struct {
	snapshot func() pipeline.Status
	hist     *history
	info     Info
}

// statusDoc is /status: the snapshot, who the instance is, the current
// rates (over the last rateWindow of the history) and the history.
type statusDoc struct {
	pipeline.Status
	Info
	InPerSec      float64  `json:"records_in_per_second"`
	OutPerSec     float64  `json:"records_out_per_second"`
	CommitsPerSec float64  `json:"commits_per_second"`
	AbortsPerSec  float64  `json:"aborts_per_second"`
	History       []Sample `json:"history"`
}

// Server serves the status page and /status from one snapshot function
// and one history, which its sampler (Sample) fills.
type Server struct{ h *statusHandlers }

// New returns the server of snapshot's status, keeping window's worth of
// history (0: 15 minutes), with info as who the instance is.
func New(snapshot func() pipeline.Status, window time.Duration, info Info) *Server {
	return &Server{h: &statusHandlers{snapshot: snapshot, hist: newHistory(snapshot, window, sampleEvery), info: info}}
}

// Status serves /status: the snapshot, who the instance is, the current
// rates and the history (?since= cuts it), as JSON.
func (s *Server) Status(w http.ResponseWriter, r *http.Request) { s.h.json(w, r) }

// Page serves the status page at / (and 404 for any other path).
func (s *Server) Page(w http.ResponseWriter, r *http.Request) { s.h.page(w, r) }

// Sample runs the history's sampler until ctx ends, the first sample at
// once.
func (s *Server) Sample(ctx context.Context) { s.h.hist.run(ctx) }

// sinceQuery parses ?since=: an RFC 3339 time, or a duration back from now; a
// zero time (all) when absent.
func sinceQuery(r *http.Request, now time.Time) (time.Time, bool) {
	v := r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, true
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), true
	}
	return time.Time{}, false
}

func (h *statusHandlers) json(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	from, ok := sinceQuery(r, now)
	if !ok {
		http.Error(w, "since: want an RFC 3339 time (2006-01-02T15:04:05Z) or a Go duration back from now (5m)", http.StatusBadRequest)
		return
	}
	d := statusDoc{Status: h.snapshot(), Info: h.info, History: []Sample{}}
	d.UptimeSeconds = now.Sub(h.info.StartedAt).Seconds()
	if h.hist != nil {
		if cur, ok := h.hist.current(); ok {
			d.InPerSec, d.OutPerSec, d.CommitsPerSec, d.AbortsPerSec = cur.InPerSec, cur.OutPerSec, cur.CommitsPerSec, cur.AbortsPerSec
		}
		if ss := h.hist.samples(from); ss != nil {
			d.History = ss
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(d)
}

// pageData is what the template renders.
type pageData struct {
	S                              pipeline.Status
	Info                           Info
	Refresh                        int
	TxnPerSec, InPerSec, OutPerSec string
	SinceCommit, Uptime            string
	Aborts                         []reasonCount
	LagGrowing                     bool
	Charts                         []template.HTML
	Rows                           []pipeline.PartitionStatus // the partitions listed, most lag first
	AllRows                        bool                       // every partition is listed
	Lagging                        int                        // partitions with lag
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
	now := time.Now()
	d := pageData{S: s, Info: h.info, Refresh: pageRefresh, TxnPerSec: "–", InPerSec: "–", OutPerSec: "–",
		Uptime: now.Sub(h.info.StartedAt).Round(time.Second).String()}
	var ss []Sample
	if h.hist != nil {
		ss = h.hist.samples(time.Time{})
		if cur, ok := h.hist.current(); ok {
			rate := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
			d.TxnPerSec, d.InPerSec, d.OutPerSec = rate(cur.CommitsPerSec), rate(cur.InPerSec), rate(cur.OutPerSec)
		}
	}
	d.LagGrowing = lagGrowing(ss)
	d.Charts = pageCharts(ss, d.LagGrowing)
	if !s.LastCommit.IsZero() {
		d.SinceCommit = now.Sub(s.LastCommit).Round(100 * time.Millisecond).String()
	}
	for reason, n := range s.Aborts {
		if n > 0 {
			d.Aborts = append(d.Aborts, reasonCount{reason, n})
		}
	}
	slices.SortFunc(d.Aborts, func(a, b reasonCount) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Reason, b.Reason)) })
	d.Rows, d.Lagging = pageRowsOf(s.Partitions, r.URL.Query().Get("partitions") == "all")
	d.AllRows = len(d.Rows) == len(s.Partitions)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := statusPage.Execute(w, d); err != nil {
		http.Error(w, "rendering the status page: "+err.Error(), http.StatusInternalServerError)
	}
}

// pageRowsOf returns the partitions to list, most lag first (ties in
// /status's order): all of them, or the first pageRows; and how many
// have lag.
func pageRowsOf(ps []pipeline.PartitionStatus, all bool) ([]pipeline.PartitionStatus, int) {
	rows := slices.Clone(ps)
	slices.SortStableFunc(rows, func(a, b pipeline.PartitionStatus) int { return cmp.Compare(b.Lag, a.Lag) })
	lagging := 0
	for _, p := range rows {
		if p.Lag > 0 {
			lagging++
		}
	}
	if !all && len(rows) > pageRows {
		rows = rows[:pageRows]
	}
	return rows, lagging
}

// Colours of the charts' lines.
const (
	colourIn, colourOut = "#1f5fbf", "#1b7f2a"
	colourAbort         = "#b00020"
	colourLag, colourP  = "#555555", "#8a4fbf"
)

// pageCharts are the page's charts over ss; the lag is drawn red while it
// has been growing for a minute.
func pageCharts(ss []Sample, lagGrowing bool) []template.HTML {
	lag := colourLag
	if lagGrowing {
		lag = colourAbort
	}
	return []template.HTML{
		chart("chart-records", "records per second", "records/s", ss,
			series{"in", colourIn, func(s Sample) float64 { return s.InPerSec }, ""},
			series{"out", colourOut, func(s Sample) float64 { return s.OutPerSec }, "5 3"}),
		chart("chart-txns", "transactions per second", "txn/s", ss,
			series{"commits", colourOut, func(s Sample) float64 { return s.CommitsPerSec }, ""},
			series{"aborts", colourAbort, func(s Sample) float64 { return s.AbortsPerSec }, ""}),
		chart("chart-lag", "total lag", "records", ss,
			series{"lag", lag, func(s Sample) float64 { return float64(s.Lag) }, ""}),
		chart("chart-lag-seconds", "lag in seconds", "s, oldest partition", ss,
			series{"lag", lag, func(s Sample) float64 { return s.LagSeconds }, ""}),
		chart("chart-latency", "end-to-end latency", "s", ss,
			series{"p50", colourIn, func(s Sample) float64 { return s.LatencyP50 }, ""},
			series{"p99", colourP, func(s Sample) float64 { return s.LatencyP99 }, ""}),
	}
}
