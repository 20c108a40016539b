package app

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/pipeline"
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
		Commits:         10, Consumed: 1000, Produced: 990,
		Aborts:    map[string]uint64{"rebalance": 2, "watchdog": 0, "injected": 5},
		LastError: &pipeline.Event{At: time.Now(), Message: "transaction aborted (injected) <b>"},
	}
}

// /status is the snapshot as JSON, with the documented field names.
func TestStatusJSON(t *testing.T) {
	h := &statusHandlers{snapshot: sampleStatus}
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
		"open_transaction", "last_commit", "commits", "aborts", "last_error", "records_consumed"} {
		if _, ok := got[k]; !ok {
			t.Errorf("/status lacks %q", k)
		}
	}
	p := got["partitions"].([]any)[0].(map[string]any)
	for k, want := range map[string]float64{"position": 120, "committed": 100, "log_end": 130, "last_stable": 125, "lag": 25, "unstable": 5} {
		if p[k] != want {
			t.Errorf("partition %s = %v, want %v", k, p[k], want)
		}
	}
}

// The page renders the same snapshot: the partition table (unknown offsets
// as a dash), aborts by reason without the zero ones, the last error
// escaped, a refresh; rates appear from the second load on.
func TestStatusPage(t *testing.T) {
	s := sampleStatus()
	h := &statusHandlers{snapshot: func() pipeline.Status { return s }}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.page(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("/")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{`<meta http-equiv="refresh" content="3">`, `<table id="partitions">`,
		`<td class="l">orders</td><td>0</td><td>120</td><td>100</td><td>130</td><td>125</td><td class="bad">25</td><td>5</td>`,
		`<td>1</td><td>–</td><td>–</td>`, "<code>jq</code> → <code>route@eu</code> (2 workers)", "generation 7", "exactly_once into PostgreSQL;",
		`<td class="l">injected</td><td>5</td>`, "transaction aborted (injected) &lt;b&gt;", "1.5 s, 42 records", `id="tps">–<`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "watchdog") || strings.Contains(body, "<script") {
		t.Error("the page lists a reason with no aborts, or has a script")
	}
	time.Sleep(600 * time.Millisecond)
	s.Commits += 6
	if _, body := get("/"); strings.Contains(body, `id="tps">–<`) || !strings.Contains(body, `id="tps">`) {
		t.Errorf("no transaction rate on the second load")
	}
	if code, _ := get("/nope"); code != 404 {
		t.Errorf("/nope = %d, want 404", code)
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
