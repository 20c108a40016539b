package pipeline

// Unit tests of the pipeline's pure pieces and of the methods that need no
// broker: option validation, error clipping, dead-letter headers, produce
// error classes, destination checks, poll sizing, lag accounting, health,
// the progress line, and one run of the chain (runChain) without retries.
// A pipeline here is built by New on a session that never connects.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// unitPipeline returns a pipeline built by New with o (OutputTopic,
// CommitInterval, MaxRecordsPerTxn and Metrics filled in when unset) on a
// session whose only broker refuses connections: enough for every method
// that does not talk to Kafka.
func unitPipeline(t *testing.T, chain *transform.Chain, o Options) *Pipeline {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := txn.New(txn.Options{
		Brokers:            []string{"127.0.0.1:1"},
		Group:              "unit",
		Topics:             []string{"in"},
		TransactionalID:    "unit",
		SessionTimeout:     10 * time.Second,
		TransactionTimeout: 8 * time.Second,
		Metrics:            txn.NewMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if o.OutputTopic == "" {
		o.OutputTopic = "out"
	}
	if o.CommitInterval == 0 {
		o.CommitInterval = 100 * time.Millisecond
	}
	if o.MaxRecordsPerTxn == 0 {
		o.MaxRecordsPerTxn = 100
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(reg)
	}
	if chain == nil {
		chain = loopChain(t, passThrough)
	}
	if o.SettingName == nil {
		o.SettingName = envSettingName
	}
	p, err := New(chain, o)
	if err != nil {
		t.Fatal(err)
	}
	p.attach(s, s)
	return p
}

// envSettingName names settings by their environment variables, as the
// processor does (cmd/processor/app).
func envSettingName(s Setting) string {
	switch s {
	case SettingOnError:
		return config.EnvName("ON_ERROR")
	case SettingTransformTimeout:
		return config.EnvName("TRANSFORM_TIMEOUT")
	case SettingTransactionTimeout:
		return config.EnvName("TRANSACTION_TIMEOUT")
	case SettingMaxCrashAttempts:
		return config.EnvName("MAX_CRASH_ATTEMPTS")
	}
	return string(s)
}

// recordingHandler is a slog.Handler that keeps every record, with its
// attributes flattened to strings, and signals each one on a channel.
type recordingHandler struct {
	mu   sync.Mutex
	recs []loggedRecord
	ch   chan loggedRecord
}

type loggedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
	at    time.Time // when the handler received it
}

func newRecordingHandler() *recordingHandler {
	return &recordingHandler{ch: make(chan loggedRecord, 100)}
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	lr := loggedRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}, at: time.Now()}
	r.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, lr)
	h.mu.Unlock()
	select {
	case h.ch <- lr:
	default:
	}
	return nil
}

// find returns the records whose message contains msg.
func (h *recordingHandler) find(msg string) []loggedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []loggedRecord
	for _, r := range h.recs {
		if strings.Contains(r.msg, msg) {
			out = append(out, r)
		}
	}
	return out
}

// New refuses options without an output topic, a positive commit interval,
// a positive record bound or metrics, a dead-letter policy without a
// dead-letter topic and an unknown policy; it accepts the smallest valid
// values.
func TestNewValidatesOptions(t *testing.T) {
	chain := loopChain(t, passThrough)
	valid := func() Options {
		return Options{OutputTopic: "out", CommitInterval: time.Nanosecond, MaxRecordsPerTxn: 1,
			Metrics: NewMetrics(prometheus.NewRegistry())}
	}
	if _, err := New(chain, valid()); err != nil {
		t.Fatalf("New with a 1ns commit interval and 1 record per transaction: %v, want no error", err)
	}
	for _, c := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no output topic", func(o *Options) { o.OutputTopic = "" }, "required"},
		{"zero commit interval", func(o *Options) { o.CommitInterval = 0 }, "required"},
		{"negative commit interval", func(o *Options) { o.CommitInterval = -time.Second }, "required"},
		{"zero records per transaction", func(o *Options) { o.MaxRecordsPerTxn = 0 }, "required"},
		{"negative records per transaction", func(o *Options) { o.MaxRecordsPerTxn = -1 }, "required"},
		{"no metrics", func(o *Options) { o.Metrics = nil }, "required"},
		{"dead letters without a topic", func(o *Options) { o.OnError = DeadLetter }, "DLQTopic"},
		{"unknown policy", func(o *Options) { o.OnError = "retry-forever" }, `"retry-forever"`},
	} {
		o := valid()
		c.edit(&o)
		p, err := New(chain, o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, %v; want an error mentioning %s", c.name, p, err, c.want)
		}
	}
}

// The error policy decides what failed() does with a record that failed for
// good: the default (no policy) and Fail return a *RecordError naming the
// record; Skip drops it, counts it and logs a warning through the
// configured logger; a pipeline without a logger logs nowhere and does not
// crash.
func TestFailedFollowsThePolicy(t *testing.T) {
	src := record.Source{Topic: "in", Partition: 2, Offset: 41}
	cause := errors.New("boom")
	for _, policy := range []OnError{"", Fail} {
		p := unitPipeline(t, nil, Options{OnError: policy})
		err := p.failed(src, &kgo.Record{}, "loop", 1, cause, "")
		var re *RecordError
		if !errors.As(err, &re) || re.Source != src || !errors.Is(err, cause) {
			t.Errorf("policy %q: failed() = %v, want a *RecordError for %+v wrapping the cause", policy, err, src)
		}
		if err != nil && !strings.Contains(err.Error(), "record topic in partition 2 offset 41: boom") {
			t.Errorf("policy %q: RecordError message %q does not name the record and cause", policy, err)
		}
		if p.open.counts.skipped != 0 {
			t.Errorf("policy %q: %d records counted as skipped", policy, p.open.counts.skipped)
		}
	}

	h := newRecordingHandler()
	p := unitPipeline(t, nil, Options{OnError: Skip, Logger: slog.New(h)})
	if err := p.failed(src, &kgo.Record{}, "loop", 3, cause, ""); err != nil {
		t.Fatalf("Skip: failed() = %v, want nil", err)
	}
	if p.open.counts.skipped != 1 {
		t.Errorf("Skip: %d records counted as skipped, want 1", p.open.counts.skipped)
	}
	warn := h.find("skipping a record")
	if len(warn) != 1 || warn[0].level != slog.LevelWarn || warn[0].attrs["offset"] != "41" || warn[0].attrs["attempts"] != "3" ||
		warn[0].attrs["err"] != "boom" {
		t.Errorf("Skip logged %+v, want one warning naming offset 41, 3 attempts and the error", warn)
	}

	quiet := unitPipeline(t, nil, Options{OnError: Skip, Logger: nil})
	if err := quiet.failed(src, &kgo.Record{}, "loop", 1, cause, ""); err != nil {
		t.Errorf("Skip without a logger: failed() = %v, want nil", err)
	}
}

// clip keeps messages of up to maxQuote bytes as they are; a longer one is
// cut at a rune boundary at or below maxQuote and says how long it was,
// even when there is no rune boundary at all.
func TestClip(t *testing.T) {
	exact := strings.Repeat("a", maxQuote)
	if got := clip(exact); got != exact {
		t.Errorf("clip of %d bytes changed it to %q", maxQuote, got)
	}
	long := strings.Repeat("b", maxQuote+1)
	if got, want := clip(long), strings.Repeat("b", maxQuote)+"... (257 bytes)"; got != want {
		t.Errorf("clip of 257 bytes = %q, want %q", got, want)
	}
	// "é" is two bytes; 255 ASCII bytes put one across the cut.
	multi := strings.Repeat("c", maxQuote-1) + "éééé"
	got := clip(multi)
	if want := strings.Repeat("c", maxQuote-1) + "... (" + strconv.Itoa(len(multi)) + " bytes)"; got != want {
		t.Errorf("clip across a rune = %q, want %q", got, want)
	}
	if !utf8.ValidString(got) {
		t.Errorf("clip produced invalid UTF-8: %q", got)
	}
	// No rune starts anywhere: nothing of it is kept.
	cont := strings.Repeat("\x80", 300)
	if got := clip(cont); got != "... (300 bytes)" {
		t.Errorf("clip of 300 continuation bytes = %q, want %q", got, "... (300 bytes)")
	}
}

// clipErr returns an error of up to maxQuote bytes unchanged, and a longer
// one with its message clipped while errors.Is still finds the original.
func TestClipErr(t *testing.T) {
	short := errors.New(strings.Repeat("x", maxQuote))
	if got := clipErr(short); got != short {
		t.Errorf("clipErr of a %d-byte error = %v (%T), want the error itself", maxQuote, got, got)
	}
	long := fmt.Errorf("%s: %w", strings.Repeat("y", maxQuote), kerr.MessageTooLarge)
	got := clipErr(long)
	if got == long {
		t.Fatal("clipErr of a long error returned it unclipped")
	}
	if want := clip(long.Error()); got.Error() != want {
		t.Errorf("clipped message %q, want %q", got.Error(), want)
	}
	if !errors.Is(got, kerr.MessageTooLarge) {
		t.Error("errors.Is does not see through the clipped error")
	}
}

// idError is an error naming a schema id, as the schema package's are.
type idError struct{ id int }

func (e idError) Error() string { return fmt.Sprintf("schema id %d not found", e.id) }
func (e idError) SchemaID() int { return e.id }

// deadLetterHeaders keeps the record's own headers in order, drops error
// headers of an earlier dead-lettering, and adds the error, the failed
// stage and the attempts; the value-dropped header only when the value was
// dropped; the schema id only when the error (wrapped anywhere) names one.
func TestDeadLetterHeaders(t *testing.T) {
	orig := []kgo.RecordHeader{
		{Key: "trace", Value: []byte("t1")},
		{Key: record.HeaderError, Value: []byte("old error")},
		{Key: record.HeaderErrorTransform, Value: []byte("old")},
		{Key: "user", Value: []byte("u")},
		{Key: record.HeaderErrorAttempts, Value: []byte("9")},
		{Key: record.HeaderErrorValueDropped, Value: []byte("old reason")},
		{Key: record.HeaderErrorSchemaID, Value: []byte("3")},
	}
	check := func(hs []kgo.RecordHeader, want []string) {
		t.Helper()
		var got []string
		for _, h := range hs {
			got = append(got, h.Key+"="+string(h.Value))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("headers\n %v\nwant\n %v", got, want)
		}
	}
	check(deadLetterHeaders(orig, "jq", 12, errors.New("bad json"), ""),
		[]string{"trace=t1", "user=u", record.HeaderError + "=bad json", record.HeaderErrorTransform + "=jq", record.HeaderErrorAttempts + "=12"})
	check(deadLetterHeaders(orig, stageProduce, 1, errors.New("too large"), "it is too large"),
		[]string{"trace=t1", "user=u", record.HeaderError + "=too large", record.HeaderErrorTransform + "=produce", record.HeaderErrorAttempts + "=1",
			record.HeaderErrorValueDropped + "=it is too large"})
	check(deadLetterHeaders(orig, "decode", 1, fmt.Errorf("value: %w", idError{2147483647}), ""),
		[]string{"trace=t1", "user=u", record.HeaderError + "=value: schema id 2147483647 not found", record.HeaderErrorTransform + "=decode",
			record.HeaderErrorAttempts + "=1", record.HeaderErrorSchemaID + "=2147483647"})
	if orig[1].Key != record.HeaderError || len(orig) != 7 {
		t.Error("deadLetterHeaders changed the original headers")
	}
}

// unproducible is true for the broker errors about the record itself,
// wrapped or not, and false for transient errors and a missing topic (the
// retry, or the destination check, deals with those).
func TestUnproducible(t *testing.T) {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
		kerr.InvalidTimestamp, kerr.TopicAuthorizationFailed, kerr.InvalidTopicException, kerr.PolicyViolation} {
		if !unproducible(e) || !unproducible(fmt.Errorf("producing: %w", e)) {
			t.Errorf("unproducible(%v) = false, want true", e)
		}
	}
	for _, e := range []error{kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.RequestTimedOut,
		context.DeadlineExceeded, errors.New("MESSAGE_TOO_LARGE")} {
		if unproducible(e) {
			t.Errorf("unproducible(%v) = true, want false", e)
		}
	}
}

// A run of aborts is unhealthy after twice the stall timeout, and never
// sooner than a minute (a broker restart or a rebalance is over by then),
// as docs/running.md says of /healthz.
func TestDefaultFailingAfter(t *testing.T) {
	for stall, want := range map[time.Duration]time.Duration{
		40 * time.Second: 80 * time.Second, // the default transaction timeout
		8 * time.Second:  time.Minute,
		5 * time.Minute:  10 * time.Minute,
	} {
		if got := defaultFailingAfter(stall); got != want {
			t.Errorf("defaultFailingAfter(%s) = %s, want %s", stall, got, want)
		}
	}
}

// A BudgetError says how many retries (not attempts) back off when there is
// no per-attempt deadline, and the attempts and their deadline otherwise.
func TestBudgetErrorMessage(t *testing.T) {
	e := &BudgetError{Worst: 70 * time.Millisecond, Budget: 50 * time.Millisecond, Attempts: 4}
	if want := "the backoff between one record's 3 retries adds up to 70ms, which does not fit the transaction's time budget of 50ms"; e.Error() != want {
		t.Errorf("BudgetError without a deadline: %q, want %q", e.Error(), want)
	}
	e = &BudgetError{Worst: 4070 * time.Millisecond, Budget: 4 * time.Second, Attempts: 4, PerAttempt: time.Second}
	if want := "one record may take 4.07s (4 attempts of up to 1s each, plus backoff between retries), which does not fit the transaction's time budget of 4s"; e.Error() != want {
		t.Errorf("BudgetError with a deadline: %q, want %q", e.Error(), want)
	}
}

// Without a TxnBudget or a TransactionTimeout, CheckBudget measures against the
// default budget, four fifths of a minute.
func TestCheckBudgetDefault(t *testing.T) {
	chain := loopChain(t, passThrough)
	var be *BudgetError
	if err := CheckBudget(Options{MaxRetries: 100}, chain); !errors.As(err, &be) || be.Budget != 48*time.Second {
		t.Errorf("CheckBudget with 100 retries and no budget = %v, want a *BudgetError against 48s", err)
	}
	if err := CheckBudget(Options{TransformTimeout: 47 * time.Second}, chain); err != nil {
		t.Errorf("CheckBudget with one 47s attempt and no budget = %v, want it to fit 48s", err)
	}
}

// checkDestinations lets outputs to the default and to other topics pass,
// and fails one routed to the dead-letter topic, to an input topic, or to a
// topic the cluster confirmed missing less than missingTTL ago (but not
// longer ago: it may have been created since).
func TestCheckDestinations(t *testing.T) {
	p := unitPipeline(t, nil, Options{OnError: DeadLetter, DLQTopic: "dlq", InputTopics: []string{"in", "in2"}})
	rec := func(topics ...string) []*kgo.Record {
		var out []*kgo.Record
		for _, t := range topics {
			out = append(out, &kgo.Record{Topic: t})
		}
		return out
	}
	if err := p.checkDestinations(rec("", "side", "other"), false); err != nil {
		t.Errorf("outputs to the default and other topics: %v", err)
	}
	for _, c := range []struct {
		topic, want string
	}{
		{"dlq", `dead-letter topic "dlq"`},
		{"in", `input topic "in"`},
		{"in2", `input topic "in2"`},
	} {
		if err := p.checkDestinations(rec("", "side", c.topic), false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("an output to %s: %v, want an error mentioning %s", c.topic, err, c.want)
		}
	}
	p.book.missing["gone"] = time.Now()
	p.book.missing["old"] = time.Now().Add(-missingTTL - time.Second)
	if err := p.checkDestinations(rec("side", "gone"), false); err == nil || !strings.Contains(err.Error(), `topic "gone", which does not exist`) {
		t.Errorf("an output to a topic confirmed missing just now: %v, want an error", err)
	}
	if err := p.checkDestinations(rec("side", "old", ""), false); err != nil {
		t.Errorf("an output to a topic confirmed missing %s ago: %v, want it to be tried again", missingTTL+time.Second, err)
	}
}

// pollSize asks for what is left of the transaction's record bound; with a
// byte bound, for what is left of it at the bytes per record seen so far
// (the larger of the last transaction's and the open one's), one record
// when none was ever measured, never more than maxPoll, and always at
// least one.
func TestPollSize(t *testing.T) {
	p := unitPipeline(t, nil, Options{MaxRecordsPerTxn: 100})
	for _, c := range []struct {
		name      string
		maxBytes  int64
		txnMax    int
		records   int
		bytes     int64
		perRecord int64
		sized     bool
		want      int
	}{
		{name: "fresh transaction", txnMax: 100, want: 100},
		{name: "part done", txnMax: 100, records: 30, want: 70},
		{name: "shrunk by the watchdog", txnMax: 8, records: 3, want: 5},
		{name: "full", txnMax: 100, records: 100, want: 1},
		{name: "bytes: nothing measured yet", maxBytes: 1000, txnMax: 100, want: 1},
		{name: "bytes: measured last time", maxBytes: 1000, txnMax: 100, perRecord: 100, sized: true, want: 10},
		{name: "bytes: record bound is smaller", maxBytes: 1000, txnMax: 4, perRecord: 100, sized: true, want: 4},
		{name: "bytes: open transaction larger than the last", maxBytes: 1000, txnMax: 100, records: 4, bytes: 400, perRecord: 50, sized: true, want: 6},
		{name: "bytes: last transaction larger than the open one", maxBytes: 1000, txnMax: 100, records: 2, bytes: 100, perRecord: 300, sized: true, want: 3},
		{name: "bytes: open transaction measures first", maxBytes: 1000, txnMax: 100, records: 2, bytes: 200, want: 8},
		{name: "bytes: over the bound", maxBytes: 1000, txnMax: 100, records: 4, bytes: 1200, perRecord: 300, sized: true, want: 1},
		{name: "bytes: only filtered records so far", maxBytes: 1000, txnMax: 100, records: 3, want: 97},
		{name: "bytes: last transaction produced nothing", maxBytes: 1000, txnMax: 100, sized: true, want: 100},
		{name: "at most maxPoll", txnMax: 100_000, records: 10, want: maxPoll},
		{name: "bytes: at most maxPoll", maxBytes: 1 << 30, txnMax: 100_000, perRecord: 100, sized: true, want: maxPoll},
	} {
		p.o.MaxTxnBytes, p.pace.max, p.open.counts.records, p.open.counts.bytes, p.pace.perRecord, p.pace.sized = c.maxBytes, c.txnMax, c.records, c.bytes, c.perRecord, c.sized
		if got := p.pollSize(); got != c.want {
			t.Errorf("%s: pollSize() = %d, want %d", c.name, got, c.want)
		}
	}
}

// fetchOf builds one fetch of topic "in" from partitions.
func fetchOf(parts ...kgo.FetchPartition) kgo.Fetches {
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: parts}}}}
}

// recordsAt returns records at offsets from to to, inclusive.
func recordsAt(from, to int64) []*kgo.Record {
	var rs []*kgo.Record
	for o := from; o <= to; o++ {
		rs = append(rs, &kgo.Record{Topic: "in", Offset: o})
	}
	return rs
}

// The partition tracker keeps, per assigned partition, the position past
// the last polled record, the committed offset and the end offsets, from
// polls (the last stable offset and high watermark the broker sends, when
// known), commits and end-offset reads. Lag is last stable minus committed
// (minus the log start before the first commit), never negative, and only
// once the last stable offset is known; Stats().Lag and the lag gauge
// follow it. Partitions that are not assigned, or fetched with an error or
// without records, change nothing, and a revoked partition's series go.
func TestPartitionsTrackLag(t *testing.T) {
	p := unitPipeline(t, nil, Options{})
	m, ps := p.o.Metrics, p.parts
	check := func(what string, wantTotal int64, want map[int32][2]int64) {
		t.Helper()
		parts, total := ps.snapshot()
		if total != wantTotal || p.Stats().Lag != wantTotal {
			t.Errorf("%s: total lag %d, Stats().Lag %d, want %d", what, total, p.Stats().Lag, wantTotal)
		}
		for _, st := range parts {
			w, ok := want[st.Partition]
			if !ok || st.Topic != "in" || st.Position != w[0] || st.Lag != w[1] {
				t.Errorf("%s: partition %+v, want position %d lag %d", what, st, w[0], w[1])
			}
			if g, ok := gaugeOf(m.ConsumerLag, "in", st.Partition); st.LastStable >= 0 && (!ok || g != float64(w[1])) {
				t.Errorf("%s: lag gauge of partition %d = %v (set: %v), want %d", what, st.Partition, g, ok, w[1])
			}
		}
		if len(parts) != len(want) {
			t.Errorf("%s: %d partitions tracked, want %d", what, len(parts), len(want))
		}
	}
	ps.assign(map[string][]int32{"in": {0, 1}})
	check("assigned", 0, map[int32][2]int64{0: {-1, 0}, 1: {-1, 0}})
	if parts, _ := ps.snapshot(); len(parts) != 2 || parts[0] != (PartitionStatus{Topic: "in", Partition: 0, Position: -1, Committed: -1, LogEnd: -1, LastStable: -1}) {
		t.Errorf("a newly assigned partition: %+v, want every offset unknown (-1)", parts)
	}
	for name, g := range map[string]*prometheus.GaugeVec{"lag": m.ConsumerLag, "committed": m.CommittedOffset, "log end": m.LogEndOffset,
		"last stable": m.LastStableOffset, "unstable": m.UnstableRecords} {
		if v, ok := gaugeOf(g, "in", 0); ok {
			t.Errorf("a %s gauge (%v) before anything is known", name, v)
		}
	}

	ps.fetched(fetchOf(
		kgo.FetchPartition{Partition: 0, HighWatermark: 120, LastStableOffset: 100, Records: recordsAt(10, 19)},
		kgo.FetchPartition{Partition: 1, HighWatermark: 500, LastStableOffset: 500, Err: errors.New("fetch failed"), Records: recordsAt(0, 3)},
		kgo.FetchPartition{Partition: 2, HighWatermark: 700, LastStableOffset: 700, Records: recordsAt(0, 3)},
	))
	check("partition 0 polled, nothing committed", 100, map[int32][2]int64{0: {20, 100}, 1: {-1, 0}})
	for name, c := range map[string]struct {
		g    *prometheus.GaugeVec
		want float64
	}{
		"log end": {m.LogEndOffset, 120}, "last stable": {m.LastStableOffset, 100}, "unstable": {m.UnstableRecords, 20},
	} {
		if g, ok := gaugeOf(c.g, "in", 0); !ok || g != c.want {
			t.Errorf("%s gauge of partition 0 = %v (set: %v), want %v", name, g, ok, c.want)
		}
	}
	if _, ok := gaugeOf(m.LogEndOffset, "in", 2); ok {
		t.Error("gauges for partition 2, which is not assigned")
	}

	ps.committed(map[string]map[int32]int64{"in": {0: 30}, "other": {0: 5}})
	check("partition 0 committed to 30", 70, map[int32][2]int64{0: {30, 70}, 1: {-1, 0}})
	if g, ok := gaugeOf(m.CommittedOffset, "in", 0); !ok || g != 30 {
		t.Errorf("committed gauge of partition 0 = %v (set: %v), want 30", g, ok)
	}

	ps.fetched(fetchOf(
		kgo.FetchPartition{Partition: 1, HighWatermark: 50, LastStableOffset: -1, Records: recordsAt(40, 44)},
		kgo.FetchPartition{Partition: 0, HighWatermark: -1, LastStableOffset: -1, Records: recordsAt(30, 34)},
	))
	check("unknown end offsets keep the known ones", 70, map[int32][2]int64{0: {35, 70}, 1: {45, 0}})
	if _, ok := gaugeOf(m.ConsumerLag, "in", 1); ok {
		t.Error("a lag gauge for partition 1 before its last stable offset is known")
	}
	if g, ok := gaugeOf(m.LogEndOffset, "in", 1); !ok || g != 50 {
		t.Errorf("log end gauge of partition 1 = %v (set: %v), want 50", g, ok)
	}

	ps.ends(map[string]map[int32]txn.Ends{"in": {1: {LogStart: 5, LogEnd: 50, LastStable: 48}}})
	check("partition 1's end offsets read", 70+43, map[int32][2]int64{0: {35, 70}, 1: {45, 43}})
	if g, ok := gaugeOf(m.UnstableRecords, "in", 1); !ok || g != 2 {
		t.Errorf("unstable gauge of partition 1 = %v (set: %v), want 2", g, ok)
	}

	ps.committed(map[string]map[int32]int64{"in": {0: 100, 1: 50}})
	check("caught up", 0, map[int32][2]int64{0: {100, 0}, 1: {50, 0}})

	ps.ends(map[string]map[int32]txn.Ends{"in": {0: {LogStart: 0, LogEnd: 0, LastStable: 0}}})
	check("a last stable offset of 0 below the committed offset", 0, map[int32][2]int64{0: {100, 0}, 1: {50, 0}})

	// An empty partition: every offset 0, and gauges to show it.
	ps.assign(map[string][]int32{"in": {0, 1, 3}})
	ps.ends(map[string]map[int32]txn.Ends{"in": {3: {LogStart: 0, LogEnd: 0, LastStable: 0}}})
	ps.committed(map[string]map[int32]int64{"in": {3: 0}})
	check("an empty partition", 0, map[int32][2]int64{0: {100, 0}, 1: {50, 0}, 3: {0, 0}})
	for name, g := range map[string]*prometheus.GaugeVec{"lag": m.ConsumerLag, "committed": m.CommittedOffset, "log end": m.LogEndOffset,
		"last stable": m.LastStableOffset, "unstable": m.UnstableRecords} {
		if v, ok := gaugeOf(g, "in", 3); !ok || v != 0 {
			t.Errorf("%s gauge of the empty partition 3 = %v (set: %v), want 0", name, v, ok)
		}
	}
	// Committed at 0 after the log start moved on: the lag counts from the
	// committed offset, not the log start.
	ps.ends(map[string]map[int32]txn.Ends{"in": {3: {LogStart: 5, LogEnd: 22, LastStable: 20}}})
	check("partition 3 committed at 0, log start 5", 20, map[int32][2]int64{0: {100, 0}, 1: {50, 0}, 3: {0, 20}})
	if parts, _ := ps.snapshot(); len(parts) != 3 || parts[2].Partition != 3 || parts[2].Unstable != 2 || parts[2].LogEnd != 22 || parts[2].LastStable != 20 {
		t.Errorf("snapshot %+v, want partitions 0, 1, 3 in order, 3 with log end 22, last stable 20, 2 unstable", parts)
	}

	// An upstream transaction open since offset 0: nothing is stable yet.
	ps.ends(map[string]map[int32]txn.Ends{"in": {3: {LogStart: 0, LogEnd: 5, LastStable: 0}}})
	if parts, _ := ps.snapshot(); len(parts) != 3 || parts[2].Unstable != 5 || parts[2].Lag != 0 {
		t.Errorf("snapshot %+v, want partition 3 with 5 unstable records and lag 0", parts)
	}
	if v, ok := gaugeOf(m.UnstableRecords, "in", 3); !ok || v != 5 {
		t.Errorf("unstable gauge of partition 3 = %v (set: %v), want 5", v, ok)
	}

	ps.assign(map[string][]int32{"in": {1}})
	check("partitions 0 and 3 revoked", 0, map[int32][2]int64{1: {50, 0}})
	for _, g := range []*prometheus.GaugeVec{m.ConsumerLag, m.CommittedOffset, m.LogEndOffset, m.LastStableOffset, m.UnstableRecords} {
		if _, ok := gaugeOf(g, "in", 0); ok {
			t.Error("a series of revoked partition 0 is still there")
		}
	}
	if ts := ps.topics(); len(ts) != 1 || ts[0] != "in" {
		t.Errorf("topics() = %v, want [in]", ts)
	}
}

// Healthy is nil before the loop has initialised, nil while its last
// iteration is within TransactionTimeout (a minute by default), an error naming
// how long it has not advanced after that, and the fatal error once Run
// stored one; Ready is false while the pipeline is not running.
func TestHealthy(t *testing.T) {
	p := unitPipeline(t, nil, Options{})
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy before the loop initialised: %v", err)
	}
	p.health.initialised.Store(true)
	p.health.lastLoop.Store(time.Now().Add(-5 * time.Second).UnixNano())
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy 5s after the last iteration, default stall timeout: %v, want nil", err)
	}
	p.health.lastLoop.Store(time.Now().Add(-2 * time.Minute).UnixNano())
	if err := p.Healthy(); err == nil || !strings.Contains(err.Error(), "has not advanced for 2m0s") {
		t.Errorf("Healthy 2m after the last iteration: %v, want a stall error", err)
	}

	short := unitPipeline(t, nil, Options{TransactionTimeout: 100 * time.Millisecond})
	short.health.initialised.Store(true)
	short.health.lastLoop.Store(time.Now().UnixNano())
	if err := short.Healthy(); err != nil {
		t.Errorf("Healthy right after an iteration: %v", err)
	}
	short.health.lastLoop.Store(time.Now().Add(-time.Second).UnixNano())
	if err := short.Healthy(); err == nil {
		t.Error("Healthy 1s after the last iteration with a 100ms stall timeout: nil, want an error")
	}
	fatal := errors.New("fenced")
	short.health.failure.Store(&fatal)
	short.health.lastLoop.Store(time.Now().UnixNano())
	if err := short.Healthy(); err != fatal {
		t.Errorf("Healthy after a fatal error: %v, want it", err)
	}
	if short.Ready() {
		t.Error("Ready() = true for a pipeline that is not running")
	}
}

// The progress line reports, per interval, the records in and out per
// second, the commits and aborts of that interval (not since start), the
// lag and readiness.
func TestProgressLine(t *testing.T) {
	h := newRecordingHandler()
	const interval = 20 * time.Millisecond
	p := unitPipeline(t, nil, Options{ProgressInterval: interval, Logger: slog.New(h)})
	const in, out = 1_000_000, 500_000
	p.stats.consumed.Store(in)
	p.stats.produced.Store(out)
	p.stats.commits.Store(3)
	p.stats.aborts.Store(2)
	p.parts.assign(map[string][]int32{"in": {0}})
	p.parts.ends(map[string]map[int32]txn.Ends{"in": {0: {LogStart: 3, LogEnd: 12, LastStable: 10}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(done)
		p.progress(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	next := func(n int) loggedRecord {
		t.Helper()
		select {
		case r := <-h.ch:
			if r.msg != "progress" {
				t.Fatalf("logged %q, want progress", r.msg)
			}
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no progress line %d within 10s at a %s interval", n, interval)
		}
		return loggedRecord{}
	}
	first := next(1)
	// The first interval is at most as long as the test waited for it.
	waited := first.at.Sub(began).Seconds()
	num := func(r loggedRecord, k string) int64 {
		t.Helper()
		n, err := strconv.ParseInt(r.attrs[k], 10, 64)
		if err != nil {
			t.Fatalf("progress %s = %q: %v", k, r.attrs[k], err)
		}
		return n
	}
	if got, atLeast := num(first, "in_per_sec"), int64(in/waited); got < atLeast {
		t.Errorf("first line: in_per_sec = %d, want at least %d (%d records within %.3fs)", got, atLeast, in, waited)
	}
	if got, atLeast := num(first, "out_per_sec"), int64(out/waited); got < atLeast {
		t.Errorf("first line: out_per_sec = %d, want at least %d (%d records within %.3fs)", got, atLeast, out, waited)
	}
	if num(first, "committed") != 3 || num(first, "aborted") != 2 || num(first, "lag") != 7 || first.attrs["ready"] != "false" {
		t.Errorf("first line: %v, want 3 committed, 2 aborted, lag 7, not ready", first.attrs)
	}
	second := next(2)
	for _, k := range []string{"in_per_sec", "out_per_sec", "committed", "aborted"} {
		if num(second, k) != 0 {
			t.Errorf("second line: %s = %s with no change since the first, want 0", k, second.attrs[k])
		}
	}
}

// One run of the chain outside a transaction: the transform's context
// carries a deadline only with a TransformTimeout; a failed record is
// restored to how it arrived (key, value, headers, timestamp) while a
// passed one keeps what the transform made of it; the failure is classed
// (permanent, timeout, retriable, panic) in transform_errors_total, a
// timed-out one says which setting bounded it, and with no retries left
// the chain runs once.
func TestRunChainOnce(t *testing.T) {
	var sawDeadline bool
	var deadline time.Time
	mode := "pass"
	var calls int
	chain := chainOf(t, "step", func(ctx context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		calls++
		deadline, sawDeadline = ctx.Deadline()
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		r.Key, r.Value, r.Timestamp = []byte("new-key"), []byte("new-value"), time.Unix(99, 0)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "added"})
		switch mode {
		case "permanent":
			return out, errors.New("permanent failure " + strings.Repeat("z", 2*maxQuote))
		case "retriable":
			return out, transform.Retriable(errors.New("try again"))
		case "panic":
			panic("transform bug")
		case "wait":
			<-ctx.Done()
			return out, ctx.Err()
		}
		return append(out, r), nil
	})
	fresh := func() *kgo.Record {
		return &kgo.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: time.Unix(1, 0),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}}
	}
	src := record.Source{Topic: "in", Partition: 1, Offset: 5}

	p := unitPipeline(t, chain, Options{MaxRetries: 3})
	r := fresh()
	out, stage, attempts, err := p.runChain(&p.pool.workers[0], src, r, nil)
	if err != nil || len(out) != 1 || attempts != 1 || stage != "" {
		t.Fatalf("runChain = %d outputs, %q, %d attempts, %v; want one output after one attempt", len(out), stage, attempts, err)
	}
	if sawDeadline {
		t.Errorf("the transform saw a deadline (%s) without a TransformTimeout", deadline)
	}
	if string(r.Value) != "new-value" || string(r.Key) != "new-key" || len(r.Headers) != 2 || !r.Timestamp.Equal(time.Unix(99, 0)) {
		t.Errorf("a passed record lost what the transform did: %q=%q, %d headers, %s", r.Key, r.Value, len(r.Headers), r.Timestamp)
	}

	// A permanent failure with retries to spare: one attempt, record restored.
	mode, calls = "permanent", 0
	r = fresh()
	_, stage, attempts, err = p.runChain(&p.pool.workers[0], src, r, nil)
	if err == nil || errors.Is(err, errWatchdog) || stage != "step" || attempts != 1 || calls != 1 {
		t.Fatalf("permanent failure: %q, %d attempts, %d calls, %v; want the error of stage step after one call", stage, attempts, calls, err)
	}
	if len(err.Error()) > maxQuote+32 || !strings.Contains(err.Error(), "bytes)") {
		t.Errorf("the error was not clipped: %d bytes", len(err.Error()))
	}
	if string(r.Key) != "k" || string(r.Value) != "v" || len(r.Headers) != 1 || !r.Timestamp.Equal(time.Unix(1, 0)) {
		t.Errorf("a failed record was not restored: %q=%q, %d headers, %s", r.Key, r.Value, len(r.Headers), r.Timestamp)
	}
	if n := testutil.ToFloat64(p.o.Metrics.TransformErrors.WithLabelValues("step", classPermanent)); n != 1 {
		t.Errorf("transform_errors_total{step,permanent} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(p.o.Metrics.Retries); n != 0 {
		t.Errorf("transform_retries_total = %v after a permanent failure, want 0", n)
	}

	// No retries: a retriable failure and a panic end at the first attempt.
	q := unitPipeline(t, chain, Options{TransformTimeout: 50 * time.Millisecond})
	for _, c := range []struct{ mode, class, msg string }{
		{"retriable", classRetriable, "try again"},
		{"panic", classPanic, "transform bug"},
		{"permanent", classPermanent, "permanent failure"},
	} {
		mode, calls = c.mode, 0
		before := time.Now()
		_, _, attempts, err := q.runChain(&q.pool.workers[0], src, fresh(), nil)
		if err == nil || attempts != 1 || calls != 1 || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "PROCESSOR_TRANSFORM_TIMEOUT") {
			t.Errorf("%s: %d attempts, %d calls, %v; want its own error after one attempt", c.mode, attempts, calls, err)
		}
		if n := testutil.ToFloat64(q.o.Metrics.TransformErrors.WithLabelValues("step", c.class)); n != 1 {
			t.Errorf("%s: transform_errors_total{step,%s} = %v, want 1", c.mode, c.class, n)
		}
		if !sawDeadline || deadline.Before(before) || deadline.After(time.Now().Add(50*time.Millisecond)) {
			t.Errorf("%s: the transform's deadline was %v (set: %v), want within 50ms of the call", c.mode, deadline, sawDeadline)
		}
	}

	// A transform that runs into the TransformTimeout.
	mode, calls = "wait", 0
	r = fresh()
	_, stage, attempts, err = q.runChain(&q.pool.workers[0], src, r, nil)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "(PROCESSOR_TRANSFORM_TIMEOUT=50ms)") || attempts != 1 || stage != "step" {
		t.Errorf("timed out: %q, %d attempts, %v; want a deadline error naming PROCESSOR_TRANSFORM_TIMEOUT", stage, attempts, err)
	}
	if n := testutil.ToFloat64(q.o.Metrics.TransformErrors.WithLabelValues("step", classTimeout)); n != 1 {
		t.Errorf("transform_errors_total{step,timeout} = %v, want 1", n)
	}
	if string(r.Value) != "v" {
		t.Errorf("a timed-out record was not restored: value %q", r.Value)
	}

	// An output routed where it must not go fails its record at stage
	// produce, restored.
	routed := chainOf(t, "step", func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		r.Value = []byte("changed")
		r.Topic = "in"
		return append(out, r), nil
	})
	rp := unitPipeline(t, routed, Options{InputTopics: []string{"in"}})
	r = fresh()
	out, stage, attempts, err = rp.runChain(&rp.pool.workers[0], src, r, nil)
	if err == nil || out != nil || stage != stageProduce || attempts != 1 || string(r.Value) != "v" {
		t.Errorf("routed to the input: %d outputs, %q, %d attempts, %v, value %q; want a produce failure, record restored", len(out), stage, attempts, err, r.Value)
	}
}

// Legacy lineage chunks are used to their last slot and then replaced,
// never grown (growing would copy every header of the transaction): a
// chunk takes exactly hdrChunk headers and the offset digits fill a chunk
// up to the last room for a 20-byte offset. A partition number, 0
// included, costs no allocation once seen.
func TestLineageChunksFillUpAndAreReplaced(t *testing.T) {
	l := newLineage(true)
	// One header of its own and three of lineage: 4 per record.
	n := hdrChunk / 4
	recs := make([]*kgo.Record, n+1)
	for i := range recs {
		recs[i] = &kgo.Record{Headers: []kgo.RecordHeader{{Key: "own", Value: []byte("x")}}}
		l.stamp(recs[i], record.Source{Topic: "in", Offset: int64(1000 + i)})
		if i == n-1 && (len(l.hdrs) != hdrChunk || cap(l.hdrs) != hdrChunk) {
			t.Fatalf("after %d records of 4 headers the chunk holds %d of %d, want it full", n, len(l.hdrs), cap(l.hdrs))
		}
	}
	if len(l.hdrs) != 4 || cap(l.hdrs) != hdrChunk {
		t.Errorf("the record after a full chunk: chunk holds %d of %d, want a new chunk of %d holding 4", len(l.hdrs), cap(l.hdrs), hdrChunk)
	}
	if got, _ := header(recs[0], record.HeaderSourceOffset); got != "1000" {
		t.Errorf("the first record's offset header is %q after the chunk was replaced", got)
	}
	if got, _ := header(recs[n-1], record.HeaderSourceOffset); got != strconv.Itoa(1000+n-1) {
		t.Errorf("the last record of the full chunk has offset header %q", got)
	}

	// Offsets of 4 digits: the chunk takes them while 20 bytes fit.
	l = newLineage(true)
	fit := (digitChunk - 20) / 4 // the last offset appended when len+20 == cap
	for i := 0; i <= fit; i++ {
		l.stamp(&kgo.Record{}, record.Source{Topic: "in", Offset: int64(1000 + i%9000)})
		if cap(l.digits) != digitChunk {
			t.Fatalf("after %d offsets the digit chunk has capacity %d, want %d", i+1, cap(l.digits), digitChunk)
		}
	}
	if len(l.digits) != 4*(fit+1) {
		t.Errorf("after %d 4-digit offsets the digit chunk holds %d bytes, want %d", fit+1, len(l.digits), 4*(fit+1))
	}
	l.stamp(&kgo.Record{}, record.Source{Topic: "in", Offset: 1234})
	if len(l.digits) != 4 || cap(l.digits) != digitChunk {
		t.Errorf("the offset after a full digit chunk: %d of %d bytes, want a new chunk holding 4", len(l.digits), cap(l.digits))
	}

	l = newLineage(true)
	r := &kgo.Record{}
	l.stamp(r, record.Source{Topic: "in", Partition: 0, Offset: 1})
	allocs := testing.AllocsPerRun(200, func() {
		r.Headers = nil
		l.stamp(r, record.Source{Topic: "in", Partition: 0, Offset: 123})
		if len(l.hdrs) > hdrChunk-8 {
			l.reset()
		}
	})
	if allocs != 0 {
		t.Errorf("stamping partition 0 allocates %.1f times per record, want 0", allocs)
	}
	if got, _ := header(r, record.HeaderSourcePartition); got != "0" {
		t.Errorf("partition header %q, want 0", got)
	}
}
