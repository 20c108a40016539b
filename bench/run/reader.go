package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// reader reads the output topic read_committed from the start, counts
// every record, and for records stamped at or after liveFrom records how
// long ago (now - record timestamp) they were stamped.
type reader struct {
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
	start    atomic.Int64 // UnixMilli of the run's start
	firstAt  atomic.Int64 // UnixNano when the first record was seen
	liveFrom atomic.Int64 // UnixMilli; 0 until the latency phase

	total, live, stamped atomic.Int64
	mu                   sync.Mutex
	lat                  []time.Duration
	stamps               []int64 // UnixMilli timestamps of the live records, as lat
}

func startReader(b *broker, topic string) (*reader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	rd := &reader{cl: cl, cancel: cancel, done: make(chan struct{})}
	rd.start.Store(time.Now().Add(time.Hour).UnixMilli())
	go func() {
		defer close(rd.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			from, start := rd.liveFrom.Load(), rd.start.Load()
			if fs.NumRecords() > 0 {
				rd.firstAt.CompareAndSwap(0, now.UnixNano())
			}
			fs.EachRecord(func(r *kgo.Record) {
				rd.total.Add(1)
				ts := r.Timestamp.UnixMilli()
				switch {
				case from != 0 && ts >= from:
					rd.live.Add(1)
					rd.mu.Lock()
					rd.lat = append(rd.lat, now.Sub(r.Timestamp))
					rd.stamps = append(rd.stamps, ts)
					rd.mu.Unlock()
				case ts >= start:
					rd.stamped.Add(1)
				}
			})
		}
	}()
	return rd, nil
}

func (rd *reader) setStart(t time.Time)    { rd.start.Store(t.UnixMilli()) }
func (rd *reader) setLiveFrom(t time.Time) { rd.liveFrom.Store(t.UnixMilli()) }

func (rd *reader) stop() {
	if rd.cancel == nil {
		return
	}
	rd.cancel()
	<-rd.done
	rd.cl.Close()
	rd.cancel = nil
}

func (rd *reader) latencies() []time.Duration {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return slices.Clone(rd.lat)
}
