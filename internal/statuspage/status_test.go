package statuspage

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/state"
)

func sampleStatus() pipeline.Status {
	return pipeline.Status{
		TransactionalID: "orders-a", Group: "orders", MemberID: "m-1", Generation: 7, Guarantee: "exactly_once", Sink: "postgres",
		Chain: []string{"jq", "route@eu"}, Workers: 2, Ready: true, Health: "ok",
		Partitions: []pipeline.PartitionStatus{
			{Topic: "orders", Partition: 0, Position: 120, Committed: 100, LogEnd: 130, LastStable: 125, Lag: 25, Unstable: 5},
			{Topic: "orders", Partition: 1, Position: -1, Committed: -1, LogEnd: -1, LastStable: -1},
		},
		Lag:             25,
		OpenTransaction: &pipeline.OpenTransaction{Began: time.Now().Add(-1500 * time.Millisecond), Age: 1.5, Records: 42},
		LastCommit:      time.Now().Add(-2 * time.Second),
		Commits:         10, Consumed: 1000, Produced: 990, Filtered: 4, DeadLettered: 3, Skipped: 1,
		Aborts:    map[string]uint64{"rebalance": 2, "watchdog": 0, "injected": 5},
		LastError: &pipeline.Event{At: time.Now(), Message: "transaction aborted (injected) <b>"},
	}
}

// /status is the snapshot as JSON, with the documented field names, the
// instance's identity, and the rates and history from the sampler.
func TestStatusJSON(t *testing.T) {
	hist := newHistory(sampleStatus, time.Minute, time.Second)
	t0 := time.Now().Add(-5 * time.Second)
	for i := range 5 {
		s := sampleStatus()
		s.Consumed, s.Produced, s.Commits = uint64(1000+100*i), uint64(990+50*i), uint64(10+i)
		hist.add(s, t0.Add(time.Duration(i)*time.Second))
	}
	started := time.Now().Add(-time.Hour)
	h := &statusHandlers{snapshot: sampleStatus, hist: hist, info: Info{Version: "1.2.3", StartedAt: started,
		InputTopics: []string{"orders", "refunds"}, OutputTopic: "orders-out", DLQTopic: "orders-dlq"}}
	rec := httptest.NewRecorder()
	h.json(rec, httptest.NewRequest("GET", "/status", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"transactional_id", "group", "generation", "guarantee", "sink", "transforms", "workers", "partitions", "lag",
		"open_transaction", "last_commit", "commits", "aborts", "last_error", "records_consumed", "records_produced",
		"version", "started_at", "uptime_seconds", "input_topics", "output_topic", "dlq_topic",
		"records_filtered", "records_dead_lettered", "records_skipped", "lag_seconds", "latency_p50_seconds", "latency_p99_seconds",
		"records_in_per_second", "records_out_per_second", "commits_per_second", "aborts_per_second", "history"} {
		if _, ok := got[k]; !ok {
			t.Errorf("/status lacks %q", k)
		}
	}
	p := got["partitions"].([]any)[0].(map[string]any)
	for k, want := range map[string]float64{"position": 120, "committed": 100, "log_end": 130, "last_stable": 125, "lag": 25, "unstable": 5, "lag_seconds": 0} {
		if p[k] != want {
			t.Errorf("partition %s = %v, want %v", k, p[k], want)
		}
	}
	if got["version"] != "1.2.3" || got["output_topic"] != "orders-out" || got["dlq_topic"] != "orders-dlq" ||
		got["records_dead_lettered"] != 3.0 || got["records_filtered"] != 4.0 || got["records_skipped"] != 1.0 {
		t.Errorf("identity or counts: %v %v %v %v %v %v", got["version"], got["output_topic"], got["dlq_topic"],
			got["records_dead_lettered"], got["records_filtered"], got["records_skipped"])
	}
	if up := got["uptime_seconds"].(float64); up < 3599 || up > 3700 {
		t.Errorf("uptime_seconds = %v, want about 3600", up)
	}
	// Rates over the samples: 100 in, 50 out, 1 commit a second.
	for k, want := range map[string]float64{"records_in_per_second": 100, "records_out_per_second": 50, "commits_per_second": 1, "aborts_per_second": 0} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if n := len(got["history"].([]any)); n != 5 {
		t.Errorf("history has %d samples, want 5", n)
	}
	last := got["history"].([]any)[4].(map[string]any)
	if last["records_consumed"] != 1400.0 || last["records_in_per_second"] != 100.0 {
		t.Errorf("last sample %v", last)
	}

	// A window: ?since= a duration back or an RFC 3339 time.
	for q, want := range map[string]int{"3500ms": 3, t0.Add(3 * time.Second).UTC().Format(time.RFC3339Nano): 2, "1h": 5} {
		rec := httptest.NewRecorder()
		h.json(rec, httptest.NewRequest("GET", "/status?since="+url.QueryEscape(q), nil))
		var d struct{ History []Sample }
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		if len(d.History) != want {
			t.Errorf("since=%s: %d samples, want %d", q, len(d.History), want)
		}
	}
	rec = httptest.NewRecorder()
	h.json(rec, httptest.NewRequest("GET", "/status?since=yesterday", nil))
	if rec.Code != 400 {
		t.Errorf("since=yesterday: %d, want 400", rec.Code)
	}
}

// The page renders the same snapshot: the partition table (unknown offsets
// as a dash, most lag first), aborts by reason without the zero ones, the
// last error escaped, a refresh, a strict CSP; rates come from the
// history, whoever else loads the page.
func TestStatusPage(t *testing.T) {
	s := sampleStatus()
	hist := newHistory(func() pipeline.Status { return s }, time.Minute, time.Second)
	h := &statusHandlers{snapshot: func() pipeline.Status { return s }, hist: hist, info: Info{Version: "1.2.3", StartedAt: time.Now()}}
	get := func(path string) (*httptest.ResponseRecorder, string) {
		rec := httptest.NewRecorder()
		h.page(rec, httptest.NewRequest("GET", path, nil))
		return rec, rec.Body.String()
	}
	rec, body := get("/")
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	for _, want := range []string{`<meta http-equiv="refresh" content="3">`, `<table id="partitions">`,
		`<td class="l">orders</td><td>0</td><td>120</td><td>100</td><td>130</td><td>125</td><td>25</td><td>0</td><td>5</td>`,
		`<td>1</td><td>–</td><td>–</td>`, "<code>jq</code> → <code>route@eu</code> (2 workers)", "generation 7", "exactly_once into PostgreSQL;",
		`<td class="l">injected</td><td>5</td>`, "transaction aborted (injected) &lt;b&gt;", "1.5 s, 42 records", `id="tps">–<`,
		"version 1.2.3", "2 partitions, 1 with lag, total lag 25; most lag first.", `id="failed">4 / 3 / 1<`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "watchdog") || strings.Contains(body, "<script") || strings.Contains(body, `class="bad">25`) {
		t.Error("the page lists a reason with no aborts, has a script, or shows a lag that is not growing as bad")
	}
	// Loading the page does not make rates; the sampler does.
	s.Commits += 6
	if _, body := get("/"); !strings.Contains(body, `id="tps">–<`) {
		t.Errorf("a transaction rate from page loads alone")
	}
	now := time.Now()
	hist.add(s, now.Add(-2*time.Second))
	s.Commits += 6
	hist.add(s, now)
	if _, body := get("/"); !strings.Contains(body, `id="tps">3.0<`) {
		t.Errorf("no transaction rate of 3.0 from the samples")
	}
	if rec, _ := get("/nope"); rec.Code != 404 {
		t.Errorf("/nope = %d, want 404", rec.Code)
	}
}

// Without aborts the page says how many transactions committed, in words
// that agree with the number.
func TestStatusPageWithoutAborts(t *testing.T) {
	for n, want := range map[uint64]string{1: "1 transaction committed", 2: "2 transactions committed"} {
		s := pipeline.Status{Commits: n}
		h := &statusHandlers{snapshot: func() pipeline.Status { return s }}
		rec := httptest.NewRecorder()
		h.page(rec, httptest.NewRequest("GET", "/", nil))
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%d: %s", n, rec.Body.String()[len(rec.Body.String())-300:])
		}
	}
}

// The page lists the join tables: mode, state, partitions, rows, bytes,
// lag, what a restore has left and the misses; none without a join.
func TestStatusPageTables(t *testing.T) {
	s := sampleStatus()
	s.Tables = []any{
		state.TableStatus{Table: "customers", Mode: "co_partitioned", Ready: true, Keys: 12, Bytes: 340, Lag: 2, Misses: 7,
			Partitions: []state.TablePartitionInfo{{Partition: 0}, {Partition: 1}}},
		state.TableStatus{Table: "products", Mode: "global", Restoring: true, RestoreRemaining: 900},
	}
	h := &statusHandlers{snapshot: func() pipeline.Status { return s }}
	rec := httptest.NewRecorder()
	h.page(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	for _, want := range []string{`<table id="tables">`,
		`<td class="l">customers</td><td class="l">co_partitioned</td><td class="l"><span class="ok">ready</span></td><td>2</td><td>12</td><td>340</td><td>2</td><td>0</td><td>7</td>`,
		`<td class="l">products</td><td class="l">global</td><td class="l"><span class="bad">restoring</span></td><td>0</td><td>0</td><td>0</td><td>0</td><td>900</td><td>0</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	s.Tables = nil
	rec = httptest.NewRecorder()
	h.page(rec, httptest.NewRequest("GET", "/", nil))
	if strings.Contains(rec.Body.String(), "Join tables") {
		t.Error("a page without joins lists join tables")
	}
}
