// Package txn owns the transactional session: the group consumer that
// reads with read_committed isolation, and one committer per way a batch
// ends: a Kafka transaction (franz-go's GroupTransactSession, committing
// the produced records together with the consumed offsets), a flush and
// then an offset commit (at least once), or a transaction of a destination
// that stores the offsets with the rows (sink.Transactional).
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
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/record"
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
	ReasonUnavailable  Reason = "unavailable"     // a service the chain depends on (a Schema Registry) failed: no record's fault
)

// Session is a transactional consume-produce session that survives broker
// restarts, transaction timeouts and coordinator moves by rebuilding its
// client. It is the group consumer; how each batch ends is its
// committer's, picked once, at construction, from Options.Guarantee and
// Options.Destination. It is used from one goroutine, except for the
// read-only accessors, which are safe anywhere.
type Session struct {
	opts Options
	log  *slog.Logger
	m    *Metrics

	cl  *kgo.Client // the group client, the committer's; replaced by a rebuild
	c   committer
	out *outcomes
	lim *limiter

	begun time.Time
	inTxn bool

	lastFence time.Time

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

	crash *crashes // nil without Options.MaxCrashAttempts
	clock *clocks  // the partitions' stream times (streamtime.go)

	stopped map[string][]int32 // partitions paused at Options.StopAt (stopat.go)
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
	if opts.Guarantee == "" {
		opts.Guarantee = ExactlyOnce
	}
	if opts.ClientID == "" {
		opts.ClientID = "processor"
	}
	s := &Session{opts: opts, log: opts.Logger, m: opts.Metrics, out: &outcomes{},
		lim: &limiter{outputs: opts.OutputTopics, log: opts.Logger, cap: opts.MaxBatchBytes}}
	s.assignGen.Store(-1)
	s.lim.cur.Store(s.lim.capped(&batchLimits{fallback: DefaultMaxMessageBytes}))
	c, err := newCommitter(opts, s.out, s.lim)
	if err != nil {
		return nil, err
	}
	s.c = c
	ids := newTopicIDs(opts.Topics, s.log)
	s.clock = newClocks(ids)
	switch {
	case opts.MaxCrashAttempts > 0 && opts.Destination == nil:
		s.crash = newCrashes(opts.MaxCrashAttempts, opts.Topics, s.log, ids, s.clock.timeOf)
	case opts.MaxCrashAttempts > 0:
		s.log.Info("crash attempts are not counted with a destination that stores the offsets: a record that kills the process is met again at every restart",
			"destination", opts.DestinationName)
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	admin, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Brokers...), kgo.ClientID(opts.ClientID),
		kgo.WithLogger(kgoLogger{s.log})}, opts.ConnOpts...)...)
	if err != nil {
		s.c.close()
		return nil, fmt.Errorf("creating the Kafka admin client: %w", err)
	}
	s.adminClient, s.admin = admin, kadm.NewClient(admin)
	s.lim.admin = s.admin
	return s, nil
}

// open creates the group client through the committer.
func (s *Session) open() error {
	cl, err := s.c.open(s.consumerOpts())
	if err != nil {
		return err
	}
	s.cl = cl
	return nil
}

// errCreating wraps a failure to create the group client.
func errCreating(err error) error { return fmt.Errorf("creating the Kafka client: %w", err) }

// consumerOpts are the group client's options that every committer
// shares.
func (s *Session) consumerOpts() []kgo.Opt {
	o := s.opts
	start := kgo.NewOffset().AtStart()
	if o.StartOffset != nil {
		start = *o.StartOffset
	}
	kopts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID(o.ClientID),
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers come with the records, so that the offsets
		// committed step over them, as Kafka's own consumer's position
		// does: a caught-up group then shows no lag on transactional
		// input. The pipeline skips them.
		kgo.KeepControlRecords(),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(start),
		kgo.SessionTimeout(o.SessionTimeout),
		// No RecordDeliveryTimeout: franz-go measures it from the
		// record's timestamp, which is the input's (as in Kafka Streams),
		// so a backlog would fail as "timed out". End bounds a stuck
		// flush by the transaction timeout instead.
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
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
		kgo.ProducerBatchMaxBytesFn(s.lim.batchLimit),
		// Half of franz-go's 1 MiB a partition per fetch. A fetched batch
		// stays in memory until every record of it is produced and
		// acknowledged, and the client fetches the next while the loop
		// works on the last: on a backlog most of the heap is fetched
		// data. Side by side with franz-go's default this cut peak memory
		// by a quarter at no cost in records/s (docs/benchmarks.md).
		kgo.FetchMaxPartitionBytes(512 << 10),
	}
	if o.InstanceID != "" {
		kopts = append(kopts, kgo.InstanceID(o.InstanceID))
	}
	if s.opts.Destination == nil {
		kopts = append(kopts, kgo.OnOffsetsFetched(s.offsetsFetched))
	}
	kopts = append(kopts, o.ConnOpts...)
	return append(kopts, o.ClientOpts...)
}

// onAssigned is the group client's OnPartitionsAssigned.
func (s *Session) onAssigned(_ context.Context, cl *kgo.Client, added map[string][]int32) {
	s.assigned.add(cl, added)
	s.joined.Store(true)
	s.countRebalance(cl)
	if len(s.opts.StopAt) > 0 { // fetched from their committed offsets, below the stop
		cl.ResumeFetchPartitions(added)
	}
}

// onRevoked is the group client's OnPartitionsRevoked.
func (s *Session) onRevoked(ctx context.Context, cl *kgo.Client, rev map[string][]int32) {
	if len(rev) > 0 {
		if s.crash != nil {
			s.crash.revoked(ctx, cl, rev, false)
		}
		s.assigned.remove(rev)
		s.clock.forget(rev)
		s.c.forget(rev)
		s.rebalanced.Store(true)
		s.countRebalance(cl)
	}
}

// onLost is the group client's OnPartitionsLost.
func (s *Session) onLost(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
	if s.crash != nil {
		s.crash.revoked(ctx, cl, nil, true)
	}
	s.assigned.clear()
	s.clock.forget(nil)
	s.c.forget(nil)
	s.rebalanced.Store(true)
	s.joined.Store(false)
	s.countRebalance(cl)
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
// retry can fix are returned at once: the transaction timeout is longer
// than the brokers' transaction.max.timeout.ms (a *TimeoutError, checked
// before the producer ID is asked for) or the broker rejects it, or the
// brokers and the client do not accept each other or the user is not
// authorized (an *AccessError). Brokers that cannot be reached, or answer
// that they are not ready, are retried.
func (s *Session) Init(ctx context.Context) error {
	s.connecting.Store(true)
	defer s.connecting.Store(false)
	// Up to 500ms before the first retry, doubling to 10s, each wait drawn
	// at random below that: instances restarted together do not retry
	// together.
	wait := backoff.New(backoff.Policy{Base: 500 * time.Millisecond, Cap: 10 * time.Second})
	for attempt := 1; ; attempt++ {
		err := s.initOnce(ctx)
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
		if err := s.refusal(err); err != nil {
			return err
		}
		d := wait.Next()
		s.log.Warn("cannot initialise the transactional producer; retrying",
			"brokers", s.opts.Brokers, "attempt", attempt, "retry_in", d.String(), "err", err.Error())
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// initOnce is one attempt of Init: the committer's first request, the
// check of read access, and what the committer prepares.
func (s *Session) initOnce(ctx context.Context) error {
	tctx, cancelTimeout := context.WithTimeout(ctx, 15*time.Second)
	defer cancelTimeout()
	actx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	s.sasl.arm(cancel)
	err := s.c.hello(actx)
	s.sasl.disarm()
	if cause := context.Cause(actx); err != nil && errors.Is(cause, errSASLDropped) && ctx.Err() == nil {
		err = cause
	}
	if err == nil {
		err = s.checkReadAccess(actx)
	}
	if err == nil {
		err = s.c.prepare(actx)
	}
	return err
}

// refusal returns the error Init returns at once for err, one that no
// retry can fix, or nil when err is to be retried.
func (s *Session) refusal(err error) error {
	if errors.Is(err, kerr.InvalidTransactionTimeout) {
		return fmt.Errorf("the broker rejects transaction timeout %s: %w", s.opts.TransactionTimeout, err)
	}
	var access *AccessError
	if errors.As(err, &access) {
		return access
	}
	var timeout *TimeoutError
	if errors.As(err, &timeout) {
		return timeout
	}
	if kind := accessKind(err); kind != 0 {
		e := &AccessError{Kind: kind, Err: err}
		if kind == AccessDenied {
			e.Resource = fmt.Sprintf("transactional ID %q", s.opts.TransactionalID)
		}
		return e
	}
	return nil
}

// Poll returns up to max buffered records, waiting until some arrive or ctx
// ends. Fetch errors are logged; the client retries them itself.
func (s *Session) Poll(ctx context.Context, max int) kgo.Fetches {
	fs := s.c.poll(ctx, max)
	s.logFetchErrors(fs)
	return s.stopAt(fs)
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

// Begin starts a transaction. If the producer is in a failed state it
// rebuilds the session and returns ErrRebuilt; any other error is fatal.
func (s *Session) Begin(ctx context.Context) error {
	if err := s.c.begin(); err != nil {
		if err := s.recover(ctx, 0, 0, fmt.Errorf("beginning a transaction: %w", err)); err != nil {
			return err
		}
		return ErrRebuilt
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
func (s *Session) Produce(ctx context.Context, r *kgo.Record, src record.Source) {
	s.c.produce(ctx, r, src, nil)
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
// with a Destination to its dead letters, with why's columns.
func (s *Session) ProduceDeadLetter(ctx context.Context, r *kgo.Record, src record.Source, why DeadLetter) {
	s.c.produce(ctx, r, src, &why)
}

// TakeFailures returns the records that failed to produce since the last
// call (at most 1000), so the caller can tell which inputs cannot be
// written at all, and forgets them.
func (s *Session) TakeFailures() []Failure { return s.out.take() }

// Close leaves the group and closes the client. End any open transaction
// first. It gives up waiting after a few seconds: an unreachable broker
// must not hold up a shutdown, and the group notices a member that is gone
// after the session timeout anyway.
func (s *Session) Close() {
	if s.crash != nil { // while still a member: the leave ends the group session
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		s.crash.revoked(ctx, s.cl, nil, false)
		cancel()
	}
	s.leave()
	closed := make(chan struct{})
	go func() {
		s.c.close()
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
	if err := s.cl.LeaveGroupContext(ctx); err != nil && ctx.Err() != nil {
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
