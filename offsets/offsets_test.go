package offsets_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/offsets"
	"github.com/streamproc/processor/txn"
)

// base is the timestamp of the first record each test writes: record i of
// a partition is stamped base + i minutes.
var base = time.Now().Add(-24 * time.Hour).Truncate(time.Minute)

// fill creates topic with parts partitions and writes n records to each,
// record i stamped base + i minutes.
func fill(t *testing.T, c *kafkatest.Cluster, topic string, parts int32, n int) {
	t.Helper()
	c.CreateTopics(t, parts, nil, topic)
	var recs []*kgo.Record
	for p := range parts {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d/%d", p, i),
				Timestamp: base.Add(time.Duration(i) * time.Minute)})
		}
	}
	c.ProduceSync(t, recs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// commit commits offsets for group, one per partition of topic, with meta.
func commit(t *testing.T, adm *kadm.Client, group, topic string, at map[int32]int64, meta string) {
	t.Helper()
	os := make(kadm.Offsets)
	for p, o := range at {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1, Metadata: meta})
	}
	if err := adm.CommitAllOffsets(ctx(t), group, os); err != nil {
		t.Fatalf("committing %v: %v", at, err)
	}
}

// committed is the group's committed offsets and metadata on topic, as
// kadm reads them.
func committed(t *testing.T, adm *kadm.Client, group, topic string) (map[int32]int64, map[int32]string) {
	t.Helper()
	rs, err := adm.FetchOffsetsForTopics(ctx(t), group, topic)
	if err != nil {
		t.Fatal(err)
	}
	at, meta := map[int32]int64{}, map[int32]string{}
	rs.Each(func(r kadm.OffsetResponse) {
		if r.Topic == topic && r.At >= 0 {
			at[r.Partition], meta[r.Partition] = r.At, r.Metadata
		}
	})
	return at, meta
}

// TestShowMatchesKadm: every partition is listed with what kadm reads:
// the committed offset and metadata, the log start (after records were
// deleted) and end, and the lag from the committed offset, or from the
// log start where none is committed.
func TestShowMatchesKadm(t *testing.T) {
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("offsets-show"), kafkatest.Unique("offsets-show-group")
		fill(t, c, topic, 3, 10)
		adm := c.Admin(t)
		ds := make(kadm.Offsets)
		ds.Add(kadm.Offset{Topic: topic, Partition: 2, At: 4})
		if _, err := adm.DeleteRecords(ctx(t), ds); err != nil {
			t.Fatal(err)
		}
		commit(t, adm, group, topic, map[int32]int64{0: 3, 1: 10}, "sp1;t=5@3")
		tool := &offsets.Tool{Admin: adm, Group: group, Topics: []string{topic}}
		ps, err := tool.Show(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		starts, _ := adm.ListStartOffsets(ctx(t), topic)
		ends, _ := adm.ListEndOffsets(ctx(t), topic)
		at, meta := committed(t, adm, group, topic)
		if len(ps) != 3 {
			t.Fatalf("Show listed %d partitions, want 3: %+v", len(ps), ps)
		}
		for i, p := range ps {
			s, _ := starts.Lookup(topic, int32(i))
			e, _ := ends.Lookup(topic, int32(i))
			want := offsets.Partition{Topic: topic, Partition: int32(i), Committed: -1, Start: s.Offset, End: e.Offset, Lag: e.Offset - s.Offset}
			if o, ok := at[int32(i)]; ok {
				want.Committed, want.Metadata, want.StoredIn, want.Lag = o, meta[int32(i)], "kafka", e.Offset-o
			}
			if p != want {
				t.Errorf("partition %d: Show = %+v, kadm says %+v", i, p, want)
			}
		}
		if ps[2].Start != 4 || ps[0].Lag != 7 || ps[1].Lag != 0 || ps[2].Lag != 6 {
			t.Errorf("Show = %+v: want log start 4 on partition 2 and lags 7, 0, 6", ps)
		}
	})
}

// TestResetByTime: a reset to a time moves each partition to the first
// offset stamped at or after it (as ListOffsets by timestamp finds it),
// and a time past the last record to the log end; a duration back is the
// same from now. The dry run changes nothing; -execute does, detaching
// the metadata of the moved offsets only.
func TestResetByTime(t *testing.T) {
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("offsets-time"), kafkatest.Unique("offsets-time-group")
		fill(t, c, topic, 2, 10)
		adm := c.Admin(t)
		commit(t, adm, group, topic, map[int32]int64{0: 2, 1: 6}, "sp1;c=1@2;e=3;t=77@2;zz=1")
		tool := &offsets.Tool{Admin: adm, Group: group, Topics: []string{topic}}
		at := base.Add(5*time.Minute + 30*time.Second) // between records 5 and 6
		target, err := offsets.ParseTarget(at.Format(time.RFC3339), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		plan, err := tool.Plan(ctx(t), target, offsets.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan) != 2 || plan[0].To != 6 || plan[1].To != 6 || !plan[0].Moves() || plan[1].Moves() {
			t.Fatalf("plan to %s = %+v, want both partitions at offset 6, partition 1 unchanged", at, plan)
		}
		if got, _ := committed(t, adm, group, topic); got[0] != 2 || got[1] != 6 || len(got) != 2 {
			t.Fatalf("the plan changed the offsets: %v", got)
		}
		if _, err := tool.Apply(ctx(t), plan); err != nil {
			t.Fatal(err)
		}
		got, meta := committed(t, adm, group, topic)
		if got[0] != 6 || got[1] != 6 {
			t.Fatalf("after the reset the offsets are %v, want 6 and 6", got)
		}
		if meta[0] != "sp1;zz=1" || meta[1] != "sp1;c=1@2;e=3;t=77@2;zz=1" {
			t.Errorf("metadata after the reset %q, %q: want the moved one detached (sp1;zz=1), the other as it was", meta[0], meta[1])
		}
		if _, ok := txn.ParseProgress(meta[0]).TimeAtOffset(6); ok {
			t.Errorf("a stream time reads at the new offset: %q", meta[0])
		}
		// A duration back: from now, 30 minutes back is after every record.
		back, _ := offsets.ParseTarget("-30m", time.Now())
		plan, err = tool.Plan(ctx(t), back, offsets.Selection{Topic: topic, Partition: 1, HasPartition: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan) != 1 || plan[0].Partition.Partition != 1 || plan[0].To != 10 {
			t.Errorf("plan -30m on partition 1 = %+v, want it alone at the log end 10", plan)
		}
		// A duration back before the first record: the log start.
		back, _ = offsets.ParseTarget(fmt.Sprintf("-%s", time.Since(base)+time.Hour), time.Now())
		if plan, err = tool.Plan(ctx(t), back, offsets.Selection{}); err != nil || plan[0].To != 0 || plan[1].To != 0 {
			t.Errorf("plan before the first record = %+v, %v: want 0 and 0", plan, err)
		}
	})
}

// TestResetTargets: earliest, latest and offsets (clamped to the log),
// and selections naming no partition.
func TestResetTargets(t *testing.T) {
	c := kafkatest.NewFake(t)
	topic, group := kafkatest.Unique("offsets-targets"), kafkatest.Unique("offsets-targets-group")
	fill(t, c, topic, 2, 5)
	tool := &offsets.Tool{Admin: c.Admin(t), Group: group, Topics: []string{topic}}
	for _, tc := range []struct {
		to      string
		want    int64
		clamped bool
	}{{"earliest", 0, false}, {"latest", 5, false}, {"3", 3, false}, {"99", 5, true}} {
		target, err := offsets.ParseTarget(tc.to, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		plan, err := tool.Plan(ctx(t), target, offsets.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range plan {
			if c.To != tc.want || c.Clamped != tc.clamped || c.Committed != -1 || !c.Moves() {
				t.Errorf("-to %s: %+v, want to %d, clamped %v", tc.to, c, tc.want, tc.clamped)
			}
		}
	}
	var mt *offsets.MissingTopicError
	missing := &offsets.Tool{Admin: c.Admin(t), Group: group, Topics: []string{topic, "no-such-topic"}}
	if _, err := missing.Show(ctx(t)); !errors.As(err, &mt) || mt.Topic != "no-such-topic" {
		t.Errorf("Show of a missing topic: %v, want a *MissingTopicError naming it", err)
	}
	var se *offsets.SelectionError
	if _, err := tool.Plan(ctx(t), offsets.Target{Kind: offsets.Earliest}, offsets.Selection{Topic: "other"}); !errors.As(err, &se) {
		t.Errorf("a topic that is no input: %v, want a *SelectionError", err)
	}
	if _, err := tool.Plan(ctx(t), offsets.Target{Kind: offsets.Earliest}, offsets.Selection{Topic: topic, Partition: 7, HasPartition: true}); !errors.As(err, &se) {
		t.Errorf("a partition the topic lacks: %v, want a *SelectionError", err)
	}
}

// TestResetRefusedWithMembers: while a consumer is a member of the
// group, Apply refuses with a *BusyError and moves nothing; once it has
// left, the same plan applies.
func TestResetRefusedWithMembers(t *testing.T) {
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("offsets-busy"), kafkatest.Unique("offsets-busy-group")
		fill(t, c, topic, 1, 5)
		adm := c.Admin(t)
		commit(t, adm, group, topic, map[int32]int64{0: 5}, "")
		member, err := kgo.NewClient(c.ClientOpts(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())...)
		if err != nil {
			t.Fatal(err)
		}
		defer member.Close()
		tool := &offsets.Tool{Admin: adm, Group: group, Topics: []string{topic}}
		joinGroup(t, tool, member)
		plan, err := tool.Plan(ctx(t), offsets.Target{Kind: offsets.Earliest}, offsets.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		var busy *offsets.BusyError
		if _, err := tool.Apply(ctx(t), plan); !errors.As(err, &busy) || len(busy.Members) != 1 {
			t.Fatalf("Apply with a member: %v, want a *BusyError naming one member", err)
		}
		if got, _ := committed(t, adm, group, topic); got[0] != 5 {
			t.Fatalf("a refused reset moved the offset to %d", got[0])
		}
		member.Close()
		if _, err := tool.Apply(ctx(t), plan); err != nil {
			t.Fatalf("Apply once the member left: %v", err)
		}
		if got, _ := committed(t, adm, group, topic); got[0] != 0 {
			t.Fatalf("after the reset the offset is %d, want 0", got[0])
		}
	})
}

// joinGroup polls with member until the group lists it.
func joinGroup(t *testing.T, tool *offsets.Tool, member *kgo.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for tool.Idle(ctx(t)) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the consumer did not join the group within a minute")
		}
		pctx, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
		member.PollFetches(pctx)
		cancel()
	}
}

// TestParseTarget: each form of -to, and what is none.
func TestParseTarget(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	for s, want := range map[string]offsets.Target{
		"earliest":             {Kind: offsets.Earliest},
		"LATEST":               {Kind: offsets.Latest},
		"42":                   {Kind: offsets.AtOffset, Offset: 42},
		"-1h30m":               {Kind: offsets.AtTime, Time: now.Add(-90 * time.Minute)},
		"2026-12-06T07:00:00Z": {Kind: offsets.AtTime, Time: now.Add(-time.Hour)},
	} {
		got, err := offsets.ParseTarget(s, now)
		if err != nil || got.Kind != want.Kind || got.Offset != want.Offset || !got.Time.Equal(want.Time) {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-5", "1h", "-0s", "yesterday", "2026-12-06", "-x"} {
		if _, err := offsets.ParseTarget(s, now); err == nil {
			t.Errorf("ParseTarget(%q) took it", s)
		}
	}
}
