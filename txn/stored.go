package txn

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// Offsets stored in the destination (Options.Destination): the same
// session and loop, with the destination's transaction in place of
// Kafka's. Produce keeps a batch's outputs as rows; End writes them, the
// dead letters and the batch's next offsets in one transaction of the
// destination (sink.Transactional.Commit), and only then copies the
// offsets to the group, for lag tools. The offsets stored in the
// destination are the truth: a member that is assigned a partition
// resumes from its stored offset (AdjustFetchOffsetsFn), and each commit
// moves a partition's stored offset only from the one this member resumed
// from or last wrote. An instance that lost a partition to another, which
// has written since, is fenced: its whole transaction rolls back, and it
// resumes every partition from what is stored. Rebalances wait until a
// batch has ended (BlockRebalanceOnPoll), as at least once.

// ErrUnwritable marks a Failure whose output can never be written (the
// destination refused its row): retrying the same record cannot help.
var ErrUnwritable = errors.New("the output cannot be written")

// stored ends a batch in the destination's own transaction.
type stored struct {
	dest  sink.Transactional
	out   *outcomes
	log   *slog.Logger
	m     *Metrics
	batch batchStart
	rows  rows

	mu sync.Mutex
	// next is, per partition this member holds, the next offset stored
	// in the destination as this member last read or wrote it (-1:
	// none): each commit expects it. Written by the group's callbacks
	// too.
	next map[record.TopicPartition]int64
	// failing is since when commits have failed without one going
	// through (zero: none failing); transient tells whether the last
	// failure was one that retrying fixes (Transactional.Retriable), why
	// is its message. Read by CommitFailing, from any goroutine.
	failing   time.Time
	transient bool
	why       string
}

func newStored(dest sink.Transactional, out *outcomes, log *slog.Logger, m *Metrics) *stored {
	return &stored{dest: dest, out: out, log: log, m: m, next: map[record.TopicPartition]int64{}}
}

// open creates a plain group client whose assigned partitions resume from
// their stored offsets. A rebuilt session starts with nothing stored: the
// new client reads the offsets when it is assigned its partitions.
func (d *stored) open(kopts []kgo.Opt) (*kgo.Client, error) {
	d.forget(nil)
	d.rows.reset()
	return d.batch.plainClient(append(kopts, kgo.AdjustFetchOffsetsFn(d.adjustOffsets)))
}

// hello pings the brokers: the session produces nothing, so it has no
// producer ID to ask for.
func (d *stored) hello(ctx context.Context) error { return d.batch.cl.Ping(ctx) }

// prepare: the destination has no batch limits to read.
func (d *stored) prepare(context.Context) error { return nil }

func (d *stored) poll(ctx context.Context, max int) kgo.Fetches { return d.batch.poll(ctx, max) }

func (d *stored) begin() error { return d.batch.begin() }

func (d *stored) produce(_ context.Context, r *kgo.Record, src record.Source, why *DeadLetter) {
	if why != nil {
		d.rows.deadLetter(r, src, *why)
		return
	}
	d.rows.row(r, src)
}

// maxRecordBytes is 0: the destination has no such limit.
func (d *stored) maxRecordBytes(string) int { return 0 }

func (d *stored) close() { d.batch.cl.Close() }

// committed returns the offsets stored in the destination for the
// partitions the member holds: they are the truth.
func (d *stored) committed() map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for tp, next := range d.next {
		if next < 0 {
			continue
		}
		if out[tp.Topic] == nil {
			out[tp.Topic] = map[int32]int64{}
		}
		out[tp.Topic][tp.Partition] = next
	}
	return out
}

// commitFailing is CommitFailing.
func (d *stored) commitFailing() (time.Time, bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failing, d.transient, d.why
}

// failed notes a failed commit for CommitFailing.
func (d *stored) failed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failing.IsZero() {
		d.failing = time.Now()
	}
	d.transient, d.why = d.dest.Retriable(err), err.Error()
}

// adjustOffsets is the group client's AdjustFetchOffsetsFn: the assigned
// partitions resume from their stored offsets, which win over the
// group's; a partition with none starts where the group says. It retries
// reading until it succeeds or the assignment is revoked.
func (d *stored) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var parts []record.TopicPartition
	for t, ps := range offsets {
		for p := range ps {
			parts = append(parts, record.TopicPartition{Topic: t, Partition: p})
		}
	}
	// Up to 250ms before the first retry, doubling to 5s, drawn at random.
	wait := backoff.New(backoff.Policy{Base: 250 * time.Millisecond, Cap: 5 * time.Second})
	for {
		stored, err := d.dest.Offsets(ctx, parts)
		if err == nil {
			d.mu.Lock()
			for _, tp := range parts {
				next, ok := stored[tp]
				if !ok {
					d.next[tp] = -1
					continue
				}
				d.next[tp] = next
				offsets[tp.Topic][tp.Partition] = kgo.NewOffset().At(next).WithEpoch(-1)
			}
			d.mu.Unlock()
			return offsets, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		retryIn := wait.Next()
		d.log.Warn("cannot read the stored offsets of the assigned partitions; retrying", "retry_in", retryIn.String(), "err", err.Error())
		if backoff.Sleep(ctx, retryIn) != nil {
			return nil, err
		}
	}
}

// forget drops what the member stored for partitions it no longer holds.
func (d *stored) forget(revoked map[string][]int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if revoked == nil {
		clear(d.next)
		return
	}
	for t, ps := range revoked {
		for _, p := range ps {
			delete(d.next, record.TopicPartition{Topic: t, Partition: p})
		}
	}
}

// rows are the open batch's rows and dead letters, with the record each
// came from (for Failures).
type rows struct {
	rows     []sink.Row
	rowRecs  []*kgo.Record
	dead     []sink.DeadLetter
	deadRecs []*kgo.Record
	last     record.Source // the source of the last row, to number its outputs
}

// row keeps r, an output of src, as a row of the open batch.
func (b *rows) row(r *kgo.Record, src record.Source) {
	row := sink.Row{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp,
		Topic: src.Topic, Partition: src.Partition, Offset: src.Offset}
	if len(b.rows) > 0 && b.last == src {
		row.Seq = b.rows[len(b.rows)-1].Seq + 1
	}
	b.last = src
	b.rows = append(b.rows, row)
	b.rowRecs = append(b.rowRecs, r)
}

// deadLetter keeps r, the dead letter of src, with why it failed.
func (b *rows) deadLetter(r *kgo.Record, src record.Source, why DeadLetter) {
	b.dead = append(b.dead, sink.DeadLetter{
		Row: sink.Row{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp,
			Topic: src.Topic, Partition: src.Partition, Offset: src.Offset},
		Error: why.Err.Error(), Stage: why.Stage, Attempts: why.Attempts})
	b.deadRecs = append(b.deadRecs, r)
}

// reset drops the open batch.
func (b *rows) reset() {
	clear(b.rows)
	clear(b.rowRecs)
	clear(b.dead)
	clear(b.deadRecs)
	b.rows, b.rowRecs, b.dead, b.deadRecs = b.rows[:0], b.rowRecs[:0], b.dead[:0], b.deadRecs[:0]
	b.last = record.Source{}
}
