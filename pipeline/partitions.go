package pipeline

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/tick"
	"github.com/streamproc/processor/txn"
)

// partitions tracks where each assigned input partition stands: the
// position the loop has read to, the offset the group committed, and the
// partition's log start, log end and last stable offsets. It publishes the
// per-partition gauges and the total lag, and answers Status. The loop
// updates it once per poll and per transaction, and a refresher reads the
// end offsets every few seconds, so lag is fresh while the loop is idle.
// Nothing here is on the per-record path.
type partitions struct {
	// epoch is the session's assignment epoch the partitions reflect; the
	// loop's goroutine only.
	epoch uint64

	mu sync.Mutex
	m  map[topicPartition]*offsets
	g  *Metrics
}

// offsets are one partition's offsets (-1 is not known yet), and its
// gauges' label values.
type offsets struct {
	position, committed, logStart, logEnd, lastStable int64
	labels                                            []string
	// head is the timestamp (Unix ms) of the first record past the
	// committed offset that a poll brought, 0 when none is known;
	// headStale says a commit has passed it since: it stays until a poll
	// brings the next one (erring by at most one transaction's span).
	head      int64
	headStale bool
}

// lagSeconds is how long before now (Unix ms) the first record not yet
// committed was written: 0 when the lag in records is 0 or no such
// record's timestamp is known.
func (o *offsets) lagSeconds(now int64) float64 {
	if lag, ok := o.lag(); (ok && lag == 0) || o.head <= 0 {
		return 0
	}
	return float64(max(now-o.head, 0)) / 1000
}

// fetchedHead notes the timestamp of the first data record of recs past
// the committed offset, unless a fresher one is known.
func (o *offsets) fetchedHead(recs []*kgo.Record) {
	if o.head > 0 && !o.headStale {
		return
	}
	for _, r := range recs {
		if !r.Attrs.IsControl() && r.Offset >= o.committed {
			if ts := r.Timestamp.UnixMilli(); ts > 0 {
				o.head, o.headStale = ts, false
			}
			return
		}
	}
}

func newPartitions(g *Metrics) *partitions {
	return &partitions{m: make(map[topicPartition]*offsets), g: g}
}

// lag is what a read_committed reader could read and the group has not
// committed (from the log start before the group's first commit), and
// whether it is known.
func (o *offsets) lag() (int64, bool) {
	if o.lastStable < 0 {
		return 0, false
	}
	from := o.committed
	if from < 0 {
		from = max(o.logStart, 0)
	}
	return max(o.lastStable-from, 0), true
}

// unstable is the records of upstream transactions not decided yet (log
// end minus last stable offset), and whether it is known.
func (o *offsets) unstable() (int64, bool) {
	if o.logEnd < 0 || o.lastStable < 0 {
		return 0, false
	}
	return max(o.logEnd-o.lastStable, 0), true
}

// assign makes the tracked partitions the assigned ones: a new one starts
// with nothing known, and a revoked one is dropped with its series.
func (ps *partitions) assign(assigned map[string][]int32) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	keep := map[topicPartition]bool{}
	for t, parts := range assigned {
		for _, p := range parts {
			tp := topicPartition{t, p}
			keep[tp] = true
			if ps.m[tp] == nil {
				ps.m[tp] = &offsets{position: -1, committed: -1, logStart: -1, logEnd: -1, lastStable: -1, labels: labels(tp)}
			}
		}
	}
	for tp := range ps.m {
		if o := ps.m[tp]; !keep[tp] {
			delete(ps.m, tp)
			l := o.labels
			for _, g := range []interface{ DeleteLabelValues(...string) bool }{
				ps.g.ConsumerLag, ps.g.LagSeconds, ps.g.CommittedOffset, ps.g.LogEndOffset, ps.g.LastStableOffset, ps.g.UnstableRecords,
			} {
				g.DeleteLabelValues(l...)
			}
		}
	}
	ps.publishLocked()
}

// fetched notes, per partition of a poll, the position past its last
// record (transaction markers included) and the end offsets the broker
// sent with it.
func (ps *partitions) fetched(fs kgo.Fetches) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
		o := ps.m[topicPartition{ftp.Topic, ftp.Partition}]
		if o == nil || ftp.Err != nil || len(ftp.Records) == 0 {
			return
		}
		o.position = ftp.Records[len(ftp.Records)-1].Offset + 1
		o.fetchedHead(ftp.Records)
		if ftp.HighWatermark >= 0 {
			o.logEnd = ftp.HighWatermark
		}
		if ftp.LastStableOffset >= 0 {
			o.lastStable = ftp.LastStableOffset
		}
		ps.publish(o) // only the partitions this poll brought
	})
}

// committed notes the group's committed offsets (as of the last commit,
// or fetched when the partitions were assigned).
func (ps *partitions) committed(c map[string]map[int32]int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for t, parts := range c {
		for p, off := range parts {
			if o := ps.m[topicPartition{t, p}]; o != nil {
				advanced := off > o.committed
				o.committed = off
				o.position = max(o.position, off)
				if advanced {
					o.headStale = true
					if lag, ok := o.lag(); !ok || lag == 0 {
						o.head = 0 // caught up: a record written later is not the one kept
					}
				}
			}
		}
	}
	ps.publishLocked()
}

// ends notes end offsets read from the cluster.
func (ps *partitions) ends(e map[string]map[int32]txn.Ends) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for t, parts := range e {
		for p, end := range parts {
			if o := ps.m[topicPartition{t, p}]; o != nil {
				o.logStart, o.logEnd, o.lastStable = end.LogStart, end.LogEnd, end.LastStable
			}
		}
	}
	ps.publishLocked()
}

// topics returns the topics with assigned partitions.
func (ps *partitions) topics() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var ts []string
	for tp := range ps.m {
		if !slices.Contains(ts, tp.topic) {
			ts = append(ts, tp.topic)
		}
	}
	slices.Sort(ts)
	return ts
}

// publishLocked sets every tracked partition's gauges.
func (ps *partitions) publishLocked() {
	for _, o := range ps.m {
		ps.publish(o)
	}
}

// publish sets one partition's gauges.
func (ps *partitions) publish(o *offsets) {
	l := o.labels
	if o.committed >= 0 {
		ps.g.CommittedOffset.WithLabelValues(l...).Set(float64(o.committed))
	}
	if o.logEnd >= 0 {
		ps.g.LogEndOffset.WithLabelValues(l...).Set(float64(o.logEnd))
	}
	if o.lastStable >= 0 {
		ps.g.LastStableOffset.WithLabelValues(l...).Set(float64(o.lastStable))
	}
	if u, ok := o.unstable(); ok {
		ps.g.UnstableRecords.WithLabelValues(l...).Set(float64(u))
	}
	if lag, ok := o.lag(); ok {
		ps.g.ConsumerLag.WithLabelValues(l...).Set(float64(lag))
	}
	ps.g.LagSeconds.WithLabelValues(l...).Set(o.lagSeconds(time.Now().UnixMilli()))
}

// snapshot returns the partitions by topic and partition, and the total
// lag.
func (ps *partitions) snapshot() ([]PartitionStatus, int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]PartitionStatus, 0, len(ps.m))
	var total int64
	now := time.Now().UnixMilli()
	for tp, o := range ps.m {
		lag, _ := o.lag()
		total += lag
		unstable, _ := o.unstable()
		out = append(out, PartitionStatus{Topic: tp.topic, Partition: tp.partition, Position: o.position, Committed: o.committed,
			LogEnd: o.logEnd, LastStable: o.lastStable, Lag: lag, Unstable: unstable, LagSeconds: o.lagSeconds(now)})
	}
	slices.SortFunc(out, func(a, b PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, total
}

func labels(tp topicPartition) []string {
	return []string{tp.topic, strconv.Itoa(int(tp.partition))}
}

// refreshEnds reads the assigned partitions' end offsets every interval
// until ctx ends, so lag stays fresh while no record arrives. A cluster
// that cannot answer is tried again at the next tick.
func (p *Pipeline) refreshEnds(ctx context.Context, interval time.Duration) {
	tick.Every(ctx, interval, func(time.Time) {
		topics := p.parts.topics()
		if len(topics) == 0 {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, interval)
		ends, err := p.observer().EndOffsets(rctx, topics)
		cancel()
		if err != nil {
			p.log.Debug("could not refresh end offsets", "err", err.Error())
			return
		}
		p.parts.ends(ends)
	})
}

// topicPartition names one partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}
