package txn

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Crash attempts (Options.MaxCrashAttempts): a record that kills the
// process (a guest that exhausts the host, a panic past recovery, an
// out-of-memory kill) would otherwise be processed again after every
// restart, for ever. A transaction that dies with its process is aborted,
// so nothing it would have written survives it; what does is a marker
// written before it.
//
// The first records of a partition after its assignment, as they are
// about to run (Session.Attempt: polled, and their state restored, as a
// death in a restore is no record's doing), get a marker written first: a plain offset commit of the same committed offset X,
// whose metadata (Progress) counts one more attempt at X and the last
// offset polled (a later poll of the same attempt that goes further
// extends it). The next transaction that commits the partition's offsets
// writes the client's default metadata: progress clears the count, and
// no marker is written again until the next assignment. A partition
// revoked, or a shutdown, with no progress since its marker writes the
// metadata back as it was: only deaths count. So a count of k at X, read
// at the next assignment, says that k processes died between polling the
// records from X on, first thing after their assignment, and committing
// any of them. A process that dies later in its life, after commits, is
// not counted: its successor's first attempt is, which is what keeps
// markers out of every transaction.
//
// At MaxCrashAttempts, the partition is a suspect: the pipeline polls one
// record at a time and commits each in a transaction of its own (Solo),
// and before each the session writes a marker naming it ("s"). A process
// that dies then names the record that killed it: the next assignment
// finds the marker and hands the record to the pipeline as a Culprit,
// which it applies the error policy to without running it. The partition
// stays a suspect until a transaction commits past the culprit or past
// the window of records the dead attempts had polled (Extent).
//
// It costs nothing per transaction: a marker per partition at its
// assignment (one request for the partitions of a poll, and one more per
// poll of the same uncommitted attempt that goes further), and one per
// record only while a partition is a suspect. At least once it works
// alike, the batch's plain offset commit in the place of the
// transaction's. With a Destination the offsets live in it, and the
// count is not kept.

// Culprit is a record that killed the process when it ran alone: the
// pipeline applies the error policy to it without running it again.
type Culprit struct {
	Topic     string
	Partition int32
	Offset    int64
	// Crashes is how many processes died with it in flight: the
	// attempts of its batch, and the one it ran alone in.
	Crashes int
}

// partKey names an input partition.
type partKey struct {
	topic     string
	partition int32
}

// attempt is what the session knows of one assigned partition's
// attempts.
type attempt struct {
	durable   Progress // as committed now, as far as the session knows
	durableAt int64    // the offset it is committed with; -1: none
	raw       string   // durable as the broker holds it, to write back
	before    string   // raw before the live marker, written back on a graceful stop
	marker    Progress // the live marker, when live
	live      bool     // a marker was written since the last commit
	done      bool     // a commit moved it since its assignment: no more markers
	suspect   bool
	culprit   int64 // the record found to have killed the process; -1: none
	reported  bool  // culprit handed to the pipeline
}

// crashes keeps the partitions' attempts for a Session. Its callbacks
// run on the group client's goroutines; everything else on the loop's.
type crashes struct {
	max    int
	log    *slog.Logger
	topics []string

	mu    sync.Mutex
	parts map[partKey]*attempt
	ids   *topicIDs // names the input topics of an OffsetFetch v10
	// timeOf is the committed stream time of a partition (clocks), which
	// the markers carry on.
	timeOf   func(partKey) (int64, bool)
	culprits []Culprit
	inDoubt  bool // an ending's outcome is unknown: write nothing back
	solo     atomic.Int32
}

func newCrashes(max int, topics []string, log *slog.Logger, ids *topicIDs, timeOf func(partKey) (int64, bool)) *crashes {
	return &crashes{max: max, log: log, topics: topics, parts: map[partKey]*attempt{}, ids: ids, timeOf: timeOf}
}

// fetched is the group client's OnOffsetsFetched: the committed offsets
// and their metadata of the partitions just assigned. It never fails the
// group session.
func (c *crashes) fetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A fetch is a new client's (a rebuild rejoins): what an ending in
	// doubt did is in the offsets read now.
	c.inDoubt = false
	for k, p := range c.ids.fetched(ctx, cl, resp) {
		c.assigned(k, p.Offset, p.Metadata)
	}
	return nil
}

// assigned notes what the group has committed for k: offset (-1: none)
// with metadata meta.
func (c *crashes) assigned(k partKey, offset int64, meta *string) {
	raw := ""
	if meta != nil {
		raw = *meta
	}
	if a := c.parts[k]; a != nil && a.live && a.marker.At == offset && a.marker.String() == raw {
		return // our own marker, read again by a rebuilt client: the same attempt
	}
	p := ParseProgress(raw)
	a := &attempt{durable: p, durableAt: offset, raw: raw, culprit: -1}
	if old := c.parts[k]; old != nil && old.suspect {
		c.solo.Add(-1)
	}
	c.parts[k] = a
	n := p.crashesAt(offset)
	if n == 0 || c.max == 0 || n < c.max {
		return
	}
	a.suspect = true
	c.solo.Add(1)
	if p.Alone {
		a.culprit = p.Solo
		c.log.Warn("a record killed the process when it ran alone; it goes where the error policy says without running again",
			"topic", k.topic, "partition", k.partition, "offset", p.Solo, "crashes", n+1)
		return
	}
	c.log.Warn("the process died while processing these records as many times as allowed; running them one at a time to find the one at fault",
		"topic", k.topic, "partition", k.partition, "from", offset, "to", p.Extent, "crashes", n)
}

// Solo reports whether a partition is a suspect: the pipeline then polls
// one record at a time and ends a transaction after each.
func (c *crashes) Solo() bool { return c.solo.Load() > 0 }

// takeCulprits returns the culprits found since the last call.
func (c *crashes) takeCulprits() []Culprit {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.culprits
	c.culprits = nil
	return out
}

// polled (Session.Attempt) writes the markers the records of fs need
// before they run:
// the first poll of a partition's attempt, a poll that goes past the
// attempt's extent, and, for a suspect, every record. In solo mode a poll
// of more than one record is oversized: it writes nothing, and the caller
// rewinds (an assignment came while it waited).
func (c *crashes) polled(ctx context.Context, cl *kgo.Client, fs kgo.Fetches) (oversized bool) {
	if c.Solo() && fs.NumRecords() > 1 {
		return true
	}
	committed := cl.CommittedOffsets()
	c.mu.Lock()
	marks := map[partKey]Progress{}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		k := partKey{p.Topic, p.Partition}
		at, ok := committed[p.Topic][p.Partition]
		if !ok || at.Offset < 0 {
			at = kgo.EpochOffset{Epoch: p.Records[0].LeaderEpoch, Offset: p.Records[0].Offset}
		}
		if m, ok := c.mark(k, at.Offset, p.Records); ok {
			c.stamp(&m, k, at.Offset)
			marks[k] = m
			if offsets[p.Topic] == nil {
				offsets[p.Topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[p.Topic][p.Partition] = at
		}
	})
	c.mu.Unlock()
	if len(marks) > 0 {
		c.writeMarks(ctx, cl, offsets, marks)
	}
	return false
}

// mark returns the marker partition k needs before recs run, committed
// at offset at, if any; a culprit among recs is noted instead.
func (c *crashes) mark(k partKey, at int64, recs []*kgo.Record) (Progress, bool) {
	a := c.parts[k]
	if a == nil { // assigned before the session kept attempts (it always does)
		a = &attempt{durableAt: -1, culprit: -1}
		c.parts[k] = a
	}
	first, last := recs[0], recs[len(recs)-1]
	data := false
	for _, r := range recs {
		data = data || !r.Attrs.IsControl()
	}
	switch {
	case a.suspect && a.culprit >= 0 && first.Offset <= a.culprit:
		if !a.reported && last.Offset >= a.culprit {
			a.reported = true
			c.culprits = append(c.culprits, Culprit{Topic: k.topic, Partition: k.partition, Offset: a.culprit,
				Crashes: a.durable.Crashes + 1})
		}
		return Progress{}, false // nothing runs before the culprit but transaction markers
	case a.suspect && first.Offset > a.durable.Extent:
		// The window is gone (retention deleted it, or the group's
		// offsets were reset past it): nothing is suspect any more; the
		// next commit ends the count (ended).
		return Progress{}, false
	case a.suspect && data:
		m := a.durable
		m.At, m.Solo, m.Alone = at, first.Offset, true
		return m, true
	case a.suspect, a.done:
		return Progress{}, false
	case a.live && last.Offset <= a.marker.Extent:
		return Progress{}, false
	case a.live:
		m := a.marker
		m.Extent = last.Offset
		return m, true
	}
	m := a.durable.withoutCrashes()
	m.Crashes, m.At, m.Extent = a.durable.crashesAt(at)+1, at, last.Offset
	if a.durable.crashesAt(at) > 0 {
		m.Extent = max(m.Extent, a.durable.Extent)
	}
	return m, true
}

// stamp sets m's stream time, for a commit of k at offset at, to the
// committed one: a marker commits the same offset again, and must not
// lose it.
func (c *crashes) stamp(m *Progress, k partKey, at int64) {
	m.Time, m.TimeAt, m.Timed = 0, 0, false
	if c.timeOf == nil {
		return
	}
	if ms, ok := c.timeOf(k); ok {
		m.Time, m.TimeAt, m.Timed = ms, at, true
	}
}

// writeMarks commits offsets, the committed offsets of the partitions of
// marks, with marks as their metadata, and waits for it. A marker that
// cannot be written leaves that attempt uncounted: the records run all
// the same.
func (c *crashes) writeMarks(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset, marks map[partKey]Progress) {
	metas := make(map[partKey]string, len(marks))
	for k, m := range marks {
		metas[k] = m.String()
	}
	errs := commitMeta(ctx, cl, offsets, metas)
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, m := range marks {
		if err := errs[k]; err != nil {
			c.log.Warn("cannot record the attempt at these records in the committed offset's metadata; a crash now is not counted",
				"topic", k.topic, "partition", k.partition, "offset", m.At, "err", err.Error())
			continue
		}
		a := c.parts[k]
		if a == nil {
			continue
		}
		if !a.live {
			a.before = a.raw
		}
		a.marker, a.live = m, true
		a.durable, a.durableAt, a.raw = m, m.At, metas[k]
	}
}

// commitMeta commits offsets in a plain offset commit, with metas as the
// partitions' metadata, and waits for it: the member's commit, in its
// generation, ordered with the client's other commits. It returns the
// partitions that failed, and why.
func commitMeta(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset, metas map[partKey]string) map[partKey]error {
	fn := func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				if m, ok := metas[partKey{t.Topic, t.Partitions[j].Partition}]; ok {
					t.Partitions[j].Metadata = kmsg.StringPtr(m)
				}
			}
		}
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	errs := map[partKey]error{}
	cl.CommitOffsetsSync(kgo.PreCommitFnContext(wctx, fn), offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			for k := range metas {
				errs[k] = err
			}
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					errs[partKey{t.Topic, p.Partition}] = err
				}
			}
		}
	})
	return errs
}

// String describes an attempt for a log line.
func (a *attempt) String() string {
	return fmt.Sprintf("{durable %q at %d, live %t, suspect %t, culprit %d}", a.raw, a.durableAt, a.live, a.suspect, a.culprit)
}
