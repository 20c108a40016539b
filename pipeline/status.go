package pipeline

import "time"

// Status is a snapshot of the processor for /status and the status page:
// who it is, what it holds, and how its transactions go. JSON field names
// are part of the /status interface.
type Status struct {
	TransactionalID string `json:"transactional_id"`
	Group           string `json:"group"`
	MemberID        string `json:"member_id"`
	Generation      int32  `json:"generation"`
	// Guarantee is the delivery guarantee: "exactly_once" or
	// "at_least_once".
	Guarantee string `json:"guarantee"`
	// Sink is where outputs go: "kafka" or "postgres".
	Sink  string   `json:"sink"`
	Chain []string `json:"transforms"`
	// Workers is how many records of different partitions run through
	// the chain at once: one, plus one per Options.Chains.
	Workers int  `json:"workers"`
	Ready   bool `json:"ready"`
	// Health is "ok", or why /healthz fails.
	Health string `json:"health"`
	// Starting is what a processor that is starting waits for (the
	// embedded broker, PostgreSQL); empty once the loop runs.
	Starting string `json:"starting,omitempty"`

	// Partitions are the assigned partitions, by topic and partition.
	Partitions []PartitionStatus `json:"partitions"`
	// Lag is the sum of the partitions' lag.
	Lag int64 `json:"lag"`
	// LagSeconds is the largest of the partitions' LagSeconds.
	LagSeconds float64 `json:"lag_seconds"`
	// LatencyP50 and LatencyP99 are quantiles of the end-to-end latency
	// (processor_end_to_end_latency_seconds) of the records committed in
	// the last LatencyWindow, from a weighted sample of each
	// transaction's records; 0 when nothing committed then.
	LatencyP50 float64 `json:"latency_p50_seconds"`
	LatencyP99 float64 `json:"latency_p99_seconds"`

	// OpenTransaction is the transaction in progress, if any.
	OpenTransaction *OpenTransaction `json:"open_transaction"`
	// LastCommit is when a transaction last committed; zero if none has.
	LastCommit time.Time `json:"last_commit"`
	Commits    uint64    `json:"commits"`
	// Aborts counts aborted transactions by reason.
	Aborts   map[string]uint64 `json:"aborts"`
	Consumed uint64            `json:"records_consumed"`
	Produced uint64            `json:"records_produced"`
	// Filtered, DeadLettered and Skipped count input records, in
	// committed transactions, that the chain turned into no output, that
	// went to the dead-letter topic, and that failed and were dropped
	// under the skip policy.
	Filtered     uint64 `json:"records_filtered"`
	DeadLettered uint64 `json:"records_dead_lettered"`
	Skipped      uint64 `json:"records_skipped"`
	// LastError is the latest abort or failure, if any.
	LastError *Event `json:"last_error"`
	// Restoring is set while the state stores' partitions are restored
	// (the instance is not ready meanwhile); State is their status per
	// store and partition (State.Status), for a stateful chain only.
	Restoring bool `json:"state_restoring,omitempty"`
	State     any  `json:"state,omitempty"`
	// Tables are the join stages' tables (state.TableStatus): restore
	// progress, keys, bytes, lag and misses.
	Tables []any `json:"tables,omitempty"`
}

// PartitionStatus is where one assigned partition stands. An offset not
// known yet is -1.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Position is the next offset the processor will read.
	Position int64 `json:"position"`
	// Committed is the next offset the group has committed: where a new
	// owner would start.
	Committed int64 `json:"committed"`
	// LogEnd is the high watermark, LastStable the last stable offset
	// (read_committed readers see records below it).
	LogEnd     int64 `json:"log_end"`
	LastStable int64 `json:"last_stable"`
	// Lag is LastStable minus Committed (from the log start before the
	// group's first commit): records a reader could read that the group
	// has not committed. Unstable is LogEnd minus LastStable: records of
	// upstream transactions not decided yet.
	Lag      int64 `json:"lag"`
	Unstable int64 `json:"unstable"`
	// LagSeconds is how long ago the first record not committed yet was
	// written (processor_consumer_lag_seconds): 0 when caught up.
	LagSeconds float64 `json:"lag_seconds"`
}

// OpenTransaction is the transaction in progress.
type OpenTransaction struct {
	Began   time.Time `json:"began"`
	Age     float64   `json:"age_seconds"`
	Records int64     `json:"records"` // input records so far
}

// Event is something that went wrong, with when.
type Event struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// Status returns a snapshot of the processor; safe from any goroutine.
func (p *Pipeline) Status() Status {
	st := Status{
		Workers:      len(p.pool.workers),
		Ready:        p.Ready(),
		Health:       "ok",
		Commits:      p.stats.commits.Load(),
		Consumed:     p.stats.consumed.Load(),
		Produced:     p.stats.produced.Load(),
		Filtered:     p.stats.filtered.Load(),
		DeadLettered: p.stats.dlq.Load(),
		Skipped:      p.stats.skipped.Load(),
		Aborts:       map[string]uint64{},
	}
	for _, e := range p.chain.Entries() {
		st.Chain = append(st.Chain, e.String())
	}
	if err := p.Healthy(); err != nil {
		st.Health = err.Error()
	}
	st.Partitions, st.Lag = p.parts.snapshot()
	for _, ps := range st.Partitions {
		st.LagSeconds = max(st.LagSeconds, ps.LagSeconds)
	}
	q := p.latency.quantiles(time.Now(), 0.5, 0.99)
	st.LatencyP50, st.LatencyP99 = q[0], q[1]
	if obs := p.observer(); obs != nil {
		p.sessionStatus(&st, obs)
	}
	if at, err := p.health.fatal(); err != nil {
		st.LastError = &Event{At: at, Message: clip(err.Error())}
	}
	if p.st.s != nil {
		st.State = p.st.s.Status()
	}
	st.Restoring, st.Tables = p.st.restoring.Load(), p.tablesStatus()
	return st
}

// sessionStatus fills in what st says of the session obs: who it is and
// its transactions.
func (p *Pipeline) sessionStatus(st *Status, obs Observer) {
	st.Group, st.TransactionalID = obs.Identity()
	st.MemberID, st.Generation = obs.Member()
	st.Guarantee, st.Sink = obs.Guarantee(), obs.Sink()
	m := obs.Metrics()
	if since := m.OpenSince(); !since.IsZero() {
		st.OpenTransaction = &OpenTransaction{Began: since, Age: time.Since(since).Seconds(), Records: p.stats.openRecords.Load()}
	}
	st.LastCommit = m.LastCommitAt()
	aborts, last := m.Aborts()
	for r, n := range aborts {
		st.Aborts[string(r)] = n
	}
	if last != nil {
		msg := "transaction aborted (" + string(last.Reason) + ")"
		if last.Detail != "" {
			msg += ": " + clip(last.Detail)
		}
		st.LastError = &Event{At: last.At, Message: msg}
	}
}
