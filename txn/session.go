// Package txn owns the transactional session: the franz-go
// GroupTransactSession that consumes in a group with read_committed
// isolation and commits produced records together with consumed offsets.
//
// It decides what an ended transaction means: committed; aborted without
// error (a rebalance revoked partitions, or an absorbed commit error, after
// which the session has already rewound to the committed offsets); or an
// error, after which the outcome is unknown and the session is rebuilt with
// a new producer epoch. Only repeated fencing, the sign of another live
// instance with the same transactional ID, is fatal.
package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/transform"
)

// Reason says why a transaction was aborted; it is the reason label of
// processor_transactions_aborted_total.
type Reason string

// Abort reasons.
const (
	ReasonRebalance    Reason = "rebalance"       // partitions were revoked or lost mid-transaction
	ReasonOffsetCommit Reason = "offset_commit"   // committing offsets failed in a way the session absorbed
	ReasonProduce      Reason = "produce_error"   // an output record could not be produced
	ReasonTransform    Reason = "transform_error" // a transform failed on a record
	ReasonFenced       Reason = "fenced"          // a newer producer with our transactional ID fenced us
	ReasonEndError     Reason = "end_error"       // ending failed; outcome unknown, session rebuilt
	ReasonInjected     Reason = "injected"        // a test asked for it (see pipeline.Options.InjectAbort)
	ReasonWatchdog     Reason = "watchdog"        // processing used up the transaction's time budget
	ReasonTimeout      Reason = "timeout"         // the broker aborted the transaction at the transaction timeout (and bumped the epoch)
)

// Options configure a Session.
type Options struct {
	Brokers            []string
	Group              string
	Topics             []string
	TransactionalID    string
	InstanceID         string // static membership when set
	SessionTimeout     time.Duration
	TransactionTimeout time.Duration
	// FenceWindow: being fenced twice within it is fatal. Default 10m.
	FenceWindow time.Duration
	Logger      *slog.Logger
	Metrics     *Metrics
	// ClientOpts are appended to the options of the group client, e.g.
	// kprom hooks.
	ClientOpts []kgo.Opt
	// ConnOpts say how to reach the brokers: TLS (kgo.DialTLSConfig) and
	// SASL (kgo.SASL), for instance. Unlike ClientOpts they apply to every
	// client the session makes: the group client, each time it is
	// rebuilt, and the admin client. When the brokers and the client do
	// not accept each other (credentials, certificates), Init returns an
	// *AccessError instead of retrying.
	ConnOpts []kgo.Opt
	// AtLeastOnce runs without transactions: End waits until the batch's
	// outputs are acknowledged, then commits the consumed offsets; an
	// aborted batch rewinds and is processed again, so outputs may be
	// written twice but none is lost. TransactionalID is not used.
	AtLeastOnce bool
	// OutputTopics are the topics the session produces to that are known
	// before it starts: the output topic, the dead-letter topic and the
	// chain's fixed destinations. Init reads their max.message.bytes, and
	// the producer's limit on a record batch to each follows it (franz-go
	// would otherwise refuse anything over 1,000,012 bytes, below Kafka's
	// default of 1,048,588). Topics routed to that are not listed get the
	// broker's message.max.bytes. See MaxRecordBytes.
	OutputTopics []string
	// Database writes the outputs into PostgreSQL instead of Kafka: each
	// batch's rows, dead letters and next offsets in one database
	// transaction, the database's offsets winning over the group's (see
	// database.go). TransactionalID is not used.
	Database *pgsink.Sink
}

// FencedError is returned when the producer was fenced again soon after a
// rebuild: another live instance holds the same transactional ID.
type FencedError struct {
	TransactionalID string
	Window          time.Duration
	Err             error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("producer fenced twice within %s: another live instance is using transactional ID %q; give every instance its own PROCESSOR_TRANSACTIONAL_ID (%v)",
		e.Window, e.TransactionalID, e.Err)
}

// Unwrap returns the broker's error.
func (e *FencedError) Unwrap() error { return e.Err }

// Session is a transactional consume-produce session that survives broker
// restarts, transaction timeouts and coordinator moves by rebuilding its
// client. It is used from one goroutine, except for the read-only
// accessors, which are safe anywhere.
type Session struct {
	opts Options
	log  *slog.Logger
	m    *Metrics

	gts   *kgo.GroupTransactSession // exactly once
	plain *kgo.Client               // at least once and database: no Kafka transactions
	db    *database                 // database mode
	// batchStart is, per partition, the first offset polled since the
	// last commit (at least once): where an aborted batch rewinds to.
	batchStart map[string]map[int32]kgo.EpochOffset
	begun      time.Time
	inTxn      bool

	lastFence time.Time

	produceErr    atomic.Pointer[error] // first failed produce of the open transaction
	failMu        sync.Mutex
	failures      []Failure
	promise       func(*kgo.Record, error)
	rebalanced    atomic.Bool  // partitions revoked or lost since the last End
	assignGen     atomic.Int32 // last group generation counted as a rebalance
	joined        atomic.Bool
	producerReady atomic.Bool
	connecting    atomic.Bool   // Init is retrying
	epoch         atomic.Uint64 // bumped on every assignment change; readers reset per-partition state
	assigned      assignment

	adminClient *kgo.Client // for end offsets, from any goroutine; not rebuilt
	admin       *kadm.Client

	sasl saslWatch // a hook of the group client, across rebuilds

	limits atomic.Pointer[batchLimits] // the producer's per-topic batch limits, read by Init
}

// New creates a session and its client. It does not contact the brokers;
// call Init next.
func New(opts Options) (*Session, error) {
	if opts.FenceWindow <= 0 {
		opts.FenceWindow = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		return nil, errors.New("txn: Options.Metrics is required")
	}
	s := &Session{opts: opts, log: opts.Logger, m: opts.Metrics}
	s.assignGen.Store(-1)
	s.promise = s.onProduced
	s.limits.Store(&batchLimits{fallback: DefaultMaxMessageBytes})
	if opts.Database != nil {
		s.db = &database{sink: opts.Database, stored: map[pgsink.TopicPartition]int64{}}
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	admin, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Brokers...), kgo.ClientID("processor-admin"),
		kgo.WithLogger(kgoLogger{s.log})}, opts.ConnOpts...)...)
	if err != nil {
		s.closeClient()
		return nil, fmt.Errorf("creating the Kafka admin client: %w", err)
	}
	s.adminClient, s.admin = admin, kadm.NewClient(admin)
	return s, nil
}

func (s *Session) open() error {
	o := s.opts
	kopts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID("processor"),
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers come with the records, so that the offsets
		// committed step over them, as Kafka's own consumer's position
		// does: a caught-up group then shows no lag on transactional
		// input. The pipeline skips them.
		kgo.KeepControlRecords(),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(o.SessionTimeout),
		// No RecordDeliveryTimeout: franz-go measures it from the
		// record's timestamp, which is the input's (as in Kafka Streams),
		// so a backlog would fail as "timed out". End bounds a stuck
		// flush by the transaction timeout instead.
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, added map[string][]int32) {
			s.assigned.add(cl, added)
			s.joined.Store(true)
			s.countRebalance(cl)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, rev map[string][]int32) {
			if len(rev) > 0 {
				s.assigned.remove(rev)
				if s.db != nil {
					s.db.forget(rev)
				}
				s.rebalanced.Store(true)
				s.countRebalance(cl)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, _ map[string][]int32) {
			s.assigned.clear()
			if s.db != nil {
				s.db.forget(nil)
			}
			s.rebalanced.Store(true)
			s.joined.Store(false)
			s.countRebalance(cl)
		}),
		kgo.WithLogger(kgoLogger{s.log}),
		// franz-go retries CONCURRENT_TRANSACTIONS (the previous
		// transaction's markers are still being written) after a
		// metadata refresh, at most every MetadataMinAge: 5s by default,
		// which would stall a transaction that follows a commit.
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.WithHooks(&s.sasl),
		// A batch may be as large as its topic takes (Init reads the
		// limits before anything is produced; franz-go asks once per
		// partition, when it first produces to it).
		kgo.ProducerBatchMaxBytesFn(s.batchLimit),
	}
	if o.InstanceID != "" {
		kopts = append(kopts, kgo.InstanceID(o.InstanceID))
	}
	kopts = append(kopts, o.ConnOpts...)
	kopts = append(kopts, o.ClientOpts...)
	if o.AtLeastOnce || s.db != nil {
		// Offsets are committed by End after the batch's outputs are
		// acknowledged (or written to the database), and rebalances wait
		// for it (AllowRebalance).
		kopts = append(kopts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
		if s.db != nil {
			kopts = append(kopts, kgo.AdjustFetchOffsetsFn(s.adjustOffsets))
		}
		cl, err := kgo.NewClient(kopts...)
		if err != nil {
			return fmt.Errorf("creating the Kafka client: %w", err)
		}
		s.plain, s.batchStart = cl, map[string]map[int32]kgo.EpochOffset{}
		return nil
	}
	kopts = append(kopts, kgo.TransactionalID(o.TransactionalID), kgo.TransactionTimeout(o.TransactionTimeout))
	gts, err := kgo.NewGroupTransactSession(kopts...)
	if err != nil {
		return fmt.Errorf("creating the Kafka client: %w", err)
	}
	s.gts = gts
	return nil
}

// client is the session's Kafka client.
func (s *Session) client() *kgo.Client {
	if s.plain != nil {
		return s.plain
	}
	return s.gts.Client()
}

// closeClient closes the session's Kafka client.
func (s *Session) closeClient() {
	if s.plain != nil {
		s.plain.Close()
		return
	}
	s.gts.Close()
}

// countRebalance counts one rebalance per group generation, however many
// callbacks that generation fires.
func (s *Session) countRebalance(cl *kgo.Client) {
	s.epoch.Add(1)
	_, gen := cl.GroupMetadata()
	if old := s.assignGen.Swap(gen); old != gen || gen < 0 {
		s.m.Rebalance.Inc()
	}
}

// Init initialises the transactional producer, retrying with backoff until
// it succeeds or ctx ends. Initialising fences any older producer with the
// same transactional ID and aborts its open transaction, so a restarted
// instance takes over from its dead predecessor at once. Errors that no
// retry can fix are returned at once: the broker rejects the transaction
// timeout, or the brokers and the client do not accept each other or the
// user is not authorized (an *AccessError). Brokers that cannot be
// reached, or answer that they are not ready, are retried.
func (s *Session) Init(ctx context.Context) error {
	s.connecting.Store(true)
	defer s.connecting.Store(false)
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		tctx, cancelTimeout := context.WithTimeout(ctx, 15*time.Second)
		actx, cancel := context.WithCancelCause(tctx)
		s.sasl.arm(cancel)
		var err error
		if s.db != nil {
			err = s.client().Ping(actx) // it produces nothing: no producer ID to ask for
		} else {
			_, _, err = s.client().ProducerID(actx)
		}
		s.sasl.disarm()
		if cause := context.Cause(actx); err != nil && errors.Is(cause, errSASLDropped) && ctx.Err() == nil {
			err = cause
		}
		if err == nil {
			err = s.checkReadAccess(actx)
		}
		if err == nil && s.db == nil {
			err = s.readLimits(actx)
		}
		cancel(nil)
		cancelTimeout()
		if err == nil {
			s.producerReady.Store(true)
			if attempt > 1 {
				s.log.Info("connected to Kafka; transactional producer initialised", "transactional_id", s.opts.TransactionalID)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			return fmt.Errorf("the broker rejects transaction timeout %s: %w", s.opts.TransactionTimeout, err)
		}
		var access *AccessError
		if errors.As(err, &access) {
			return access
		}
		if kind := accessKind(err); kind != 0 {
			e := &AccessError{Kind: kind, Err: err}
			if kind == AccessDenied {
				e.Resource = fmt.Sprintf("transactional ID %q", s.opts.TransactionalID)
			}
			return e
		}
		s.log.Warn("cannot initialise the transactional producer; retrying",
			"brokers", s.opts.Brokers, "attempt", attempt, "retry_in", backoff.String(), "err", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// MissingTopics returns which of topics the cluster does not have. It
// answers nil, nil for no topics, and an error when the cluster cannot say.
func (s *Session) MissingTopics(ctx context.Context, topics []string) ([]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	// A metadata request of its own: kadm's ListTopics may answer from the
	// client's cached metadata, which can predate a topic created a moment
	// ago, and a topic confirmed missing fails records for missingTTL.
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.client())
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	exists := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic != nil && !errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.UnknownTopicOrPartition) {
			exists[*t.Topic] = true
		}
	}
	var missing []string
	for _, t := range topics {
		if !exists[t] {
			missing = append(missing, t)
		}
	}
	return missing, nil
}

// Poll returns up to max buffered records, waiting until some arrive or ctx
// ends. Fetch errors are logged; the client retries them itself.
func (s *Session) Poll(ctx context.Context, max int) kgo.Fetches {
	if s.plain != nil {
		return s.pollAtLeastOnce(ctx, max)
	}
	fs := s.gts.PollRecords(ctx, max)
	s.logFetchErrors(fs)
	return fs
}

// logFetchErrors logs the errors of a poll but those of its own ending.
func (s *Session) logFetchErrors(fs kgo.Fetches) {
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		s.log.Warn("fetch error", "topic", t, "partition", p, "err", err.Error())
	})
}

// ErrRebuilt is returned by Begin when the producer had failed and the
// session was rebuilt: records polled before the call belong to the old
// client and must be dropped; the new one fetches them again from the
// committed offsets.
var ErrRebuilt = errors.New("transactional session rebuilt")

// Begin starts a transaction. If the producer is in a failed state it
// rebuilds the session and returns ErrRebuilt; any other error is fatal.
func (s *Session) Begin(ctx context.Context) error {
	if s.gts != nil { // at least once has no transaction to begin
		if err := s.gts.Begin(); err != nil {
			if err := s.recover(ctx, 0, 0, fmt.Errorf("beginning a transaction: %w", err)); err != nil {
				return err
			}
			return ErrRebuilt
		}
	}
	s.begun = time.Now()
	s.inTxn = true
	s.m.openSince.Store(s.begun.UnixNano())
	return nil
}

// InTxn reports whether a transaction is open.
func (s *Session) InTxn() bool { return s.inTxn }

// Begun returns when the open transaction began.
func (s *Session) Begun() time.Time { return s.begun }

// Produce buffers r in the open transaction. A record that fails makes
// the transaction abort at End instead of committing. ctx bounds the wait
// for buffer space (the client holds at most 50,000 unacknowledged
// records, franz-go's default): when it ends first, r fails with ctx's
// error, which aborts the transaction.
func (s *Session) Produce(ctx context.Context, r *kgo.Record, src transform.Source) {
	if s.db != nil {
		s.db.produceRow(r, src)
		return
	}
	if s.plain != nil {
		s.plain.Produce(ctx, r, s.promise)
		return
	}
	s.gts.Produce(ctx, r, s.promise)
}

// DeadLetter is why an input record was given up on: the chain entry (or
// "produce") that failed, after how many attempts, with what error.
type DeadLetter struct {
	Stage    string
	Attempts int
	Err      error
}

// ProduceDeadLetter buffers r, the dead letter of input src, in the open
// transaction, as Produce does: to r's topic (the dead-letter topic), or
// in database mode to the dead-letter table, with why's columns.
func (s *Session) ProduceDeadLetter(ctx context.Context, r *kgo.Record, src transform.Source, why DeadLetter) {
	if s.db != nil {
		s.db.produceDeadLetter(r, src, why)
		return
	}
	s.Produce(ctx, r, src)
}

// Failure is an output record that could not be produced, and why.
type Failure struct {
	Record *kgo.Record
	Err    error
}

// maxFailures bounds the failures kept per transaction.
const maxFailures = 1000

// onProduced keeps the first produce error of the transaction, and the
// failed records.
func (s *Session) onProduced(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	s.produceErr.CompareAndSwap(nil, &err)
	s.failMu.Lock()
	if len(s.failures) < maxFailures {
		s.failures = append(s.failures, Failure{Record: r, Err: err})
	}
	s.failMu.Unlock()
}

// TakeFailures returns the records that failed to produce since the last
// call (at most 1000), so the caller can tell which inputs cannot be
// written at all, and forgets them.
func (s *Session) TakeFailures() []Failure {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	f := s.failures
	s.failures = nil
	return f
}

// End ends the open transaction: it commits when abort is empty, and
// aborts with that reason otherwise. records is the number of input
// records the transaction covered.
//
// It returns whether the transaction committed. An abort, asked for or not,
// leaves the session rewound to the last committed offsets, so the aborted
// input is consumed again. When ending fails (outcome unknown, or the
// producer was fenced), End rebuilds the session and returns nil; the
// returned error is fatal: a *FencedError, a *pgsink.PersistentError (in
// database mode, a failure no retry fixes), or ctx's error.
//
// Canceling ctx does not cut the ending short, which would leave its
// outcome unknown: ending is bounded by the transaction timeout instead.
// ctx bounds the rebuild that may follow.
func (s *Session) End(ctx context.Context, records int, abort Reason) (bool, error) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.TransactionTimeout)
	defer cancel()
	var detail string // why, for an abort the session decides
	if s.db == nil && (abort == "" || abort == ReasonInjected || s.plain != nil) {
		// Every record must be acknowledged before a commit: one that
		// failed turns the commit into an abort. (An injected abort also
		// lets its records reach the log, the hardest case for readers.)
		if err := s.client().Flush(ectx); err == nil {
			if perr := s.produceErr.Load(); perr != nil && abort == "" {
				abort = ReasonProduce
				if time.Since(s.begun) >= s.opts.TransactionTimeout {
					// The broker aborted it at the timeout; Kafka 4
					// (KIP-890) then fails its produces this way.
					abort = ReasonTimeout
				}
				detail = "an output record could not be produced: " + (*perr).Error()
				s.log.Warn("an output record could not be produced; aborting the transaction", "reason", string(abort), "err", (*perr).Error())
			}
		}
	}
	var committed bool
	var err error
	switch {
	case s.db != nil:
		var decided Reason
		committed, decided, detail, err = s.endDatabase(ectx, abort)
		if decided != "" {
			abort = decided
		}
	case s.plain != nil:
		var why string
		if committed, why = s.endAtLeastOnce(ectx, abort); why != "" {
			detail = why
		}
	default:
		committed, err = s.gts.End(ectx, kgo.TransactionEndTry(abort == ""))
	}
	// Every record of the transaction has been acknowledged or failed by
	// now (End flushes, or fails what is buffered), so no error of this
	// transaction can reach the next one's.
	s.produceErr.Store(nil)
	s.inTxn = false
	s.m.openSince.Store(0)
	age := time.Since(s.begun)
	s.m.Duration.Observe(age.Seconds())
	rebalanced := s.rebalanced.Swap(false)
	switch {
	case err == nil && committed:
		s.m.Committed.Inc()
		s.m.Records.Observe(float64(records))
		now := time.Now().UnixNano()
		s.m.lastCommit.Store(now)
		s.m.LastCommit.Set(float64(now) / 1e9)
		return true, nil
	case err == nil:
		if abort == "" {
			abort = ReasonOffsetCommit
			if rebalanced {
				abort = ReasonRebalance
			}
		}
		s.m.countAbort(abort, detail)
		s.log.Info("transaction aborted; its input will be processed again", "reason", string(abort), "records", records)
		return false, nil
	}
	var persistent *pgsink.PersistentError
	if errors.As(err, &persistent) { // a rebuild cannot fix the database's refusal
		s.m.countAbort(ReasonEndError, err.Error())
		return false, err
	}
	if ctx.Err() != nil {
		return false, fmt.Errorf("ending the transaction: %w", ctx.Err())
	}
	return false, s.recover(ctx, records, age, err)
}

// recover handles a failed producer: it counts the abort, exits on
// repeated fencing, and otherwise rebuilds the session. age is how long
// the failed transaction had been open (0 when none was): a transaction
// open for the transaction timeout was aborted by the broker, which bumps
// the producer epoch, so the fencing error that follows is our own
// timeout and not another instance.
func (s *Session) recover(ctx context.Context, records int, age time.Duration, err error) error {
	reason := ReasonEndError
	switch {
	case IsFenced(err) && age >= s.opts.TransactionTimeout:
		reason = ReasonTimeout
	case IsFenced(err):
		reason = ReasonFenced
		s.m.Fenced.Inc()
		now := time.Now()
		if !s.lastFence.IsZero() && now.Sub(s.lastFence) < s.opts.FenceWindow {
			s.m.countAbort(reason, err.Error())
			return &FencedError{TransactionalID: s.opts.TransactionalID, Window: s.opts.FenceWindow, Err: err}
		}
		s.lastFence = now
	}
	s.m.countAbort(reason, err.Error())
	s.log.Warn("the transaction failed; rebuilding the session with a new producer epoch",
		"reason", string(reason), "records", records, "err", err.Error())
	return s.rebuild(ctx)
}

// IsFenced reports whether err means a newer producer with the same
// transactional ID has taken over.
func IsFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.FencedInstanceID)
}

// rebuild replaces the client: the old one leaves, the new one rejoins the
// group and initialises the producer, which aborts whatever the old epoch
// left open.
func (s *Session) rebuild(ctx context.Context) error {
	s.producerReady.Store(false)
	s.joined.Store(false)
	s.leave()
	s.closeClient()
	if s.db != nil {
		s.db.forget(nil) // the new client reads them when assigned
		s.db.reset()
		clear(s.batchStart)
	}
	if err := s.open(); err != nil {
		return err
	}
	s.epoch.Add(1)
	return s.Init(ctx)
}

// Close leaves the group and closes the client. End any open transaction
// first. It gives up waiting after a few seconds: an unreachable broker
// must not hold up a shutdown, and the group notices a member that is gone
// after the session timeout anyway.
func (s *Session) Close() {
	s.leave()
	closed := make(chan struct{})
	go func() {
		s.closeClient()
		s.adminClient.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(closeTimeout):
		s.log.Warn("closing the Kafka client is taking long; exiting without waiting", "waited", closeTimeout.String())
	}
}

// closeTimeout bounds leaving the group and closing the client.
const closeTimeout = 5 * time.Second

// leave leaves the group, waiting at most closeTimeout.
func (s *Session) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := s.client().LeaveGroupContext(ctx); err != nil && ctx.Err() != nil {
		s.log.Warn("leaving the group timed out; its coordinator will notice after the session timeout", "err", err.Error())
	}
}

// Ready reports whether the session has joined its group and initialised
// its transactional producer.
func (s *Session) Ready() bool { return s.producerReady.Load() && s.joined.Load() }

// Connecting reports whether the session is waiting for the brokers to
// initialise its producer.
func (s *Session) Connecting() bool { return s.connecting.Load() }

// Metrics returns the session's transaction metrics, whose accessors
// (Aborts, OpenSince, LastCommitAt) a status page reads.
func (s *Session) Metrics() *Metrics { return s.m }

// AssignmentEpoch changes whenever the assignment may have changed
// (rebalance or rebuild), so callers can drop per-partition state.
func (s *Session) AssignmentEpoch() uint64 { return s.epoch.Load() }

// kgoLogger routes franz-go's own logs into slog. franz-go logs every
// transaction at info, so its info becomes our debug; and so do its
// warnings and errors about a refused connection (credentials,
// certificates), which it logs per connection attempt: Init reports the
// refusal itself, once, as the error that stops the processor.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case k.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelInfo
	case k.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelError
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelDebug
	switch {
	case refusal(keyvals):
	case level == kgo.LogLevelError:
		l = slog.LevelError
	case level == kgo.LogLevelWarn:
		l = slog.LevelWarn
	}
	k.l.Log(context.Background(), l, "kafka client: "+msg, keyvals...)
}

// refusal reports whether one of a log line's values is an error that
// accessKind recognises.
func refusal(keyvals []any) bool {
	for _, v := range keyvals {
		if err, ok := v.(error); ok && accessKind(err) != 0 {
			return true
		}
	}
	return false
}
