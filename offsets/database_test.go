package offsets_test

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/offsets"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/record"
)

// TestDatabaseOffsets: with offsets kept in PostgreSQL, Show reads the
// offsets table (the group's commit where a partition has no row, as the
// processor resumes), a reset writes every row in one transaction and
// copies the offsets to the group, a check that fails before COMMIT
// leaves every row as it was, and a member in the group refuses it.
func TestDatabaseOffsets(t *testing.T) {
	db := pgtest.New(t)
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("offsets-db"), kafkatest.Unique("offsets-db-group")
		fill(t, c, topic, 3, 10)
		adm := c.Admin(t)
		sink, err := pgsink.Open(ctx(t), pgsink.Options{URL: db.URL, Group: group})
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		tp := func(p int32) record.TopicPartition { return record.TopicPartition{Topic: topic, Partition: p} }
		none := func(context.Context) error { return nil }
		if err := sink.SetOffsets(ctx(t), map[record.TopicPartition]int64{tp(0): 4, tp(1): 7}, none); err != nil {
			t.Fatal(err)
		}
		commit(t, adm, group, topic, map[int32]int64{0: 1, 2: 2}, "")
		kafka := &offsets.KafkaStore{Admin: adm, Group: group}
		tool := &offsets.Tool{Admin: adm, Group: group, Topics: []string{topic},
			Store: &offsets.DatabaseStore{DB: sink, Name: "postgres", Kafka: kafka}}
		ps, err := tool.Show(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			at    int64
			where string
		}{{4, "postgres"}, {7, "postgres"}, {2, "kafka"}}
		for i, p := range ps {
			if p.Committed != want[i].at || p.StoredIn != want[i].where || p.Lag != 10-want[i].at {
				t.Errorf("partition %d: %+v, want %d from %s", i, p, want[i].at, want[i].where)
			}
		}
		plan, err := tool.Plan(ctx(t), offsets.Target{Kind: offsets.AtOffset, Offset: 5}, offsets.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		// A check that fails just before COMMIT rolls every row back.
		refused := errors.New("refused")
		to := map[record.TopicPartition]int64{tp(0): 5, tp(1): 5, tp(2): 5}
		if err := sink.SetOffsets(ctx(t), to, func(context.Context) error { return refused }); !errors.Is(err, refused) {
			t.Fatalf("SetOffsets with a failing check: %v", err)
		}
		if got := stored(t, sink, topic); len(got) != 2 || got[tp(0)] != 4 || got[tp(1)] != 7 {
			t.Fatalf("a rolled back reset left %v", got)
		}
		member, err := kgo.NewClient(c.ClientOpts(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())...)
		if err != nil {
			t.Fatal(err)
		}
		joinGroup(t, tool, member)
		var busy *offsets.BusyError
		if _, err := tool.Apply(ctx(t), plan); !errors.As(err, &busy) {
			t.Fatalf("Apply with a member: %v, want a *BusyError", err)
		}
		member.Close()
		if _, err := tool.Apply(ctx(t), plan); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, sink, topic); len(got) != 3 || got[tp(0)] != 5 || got[tp(1)] != 5 || got[tp(2)] != 5 {
			t.Errorf("after the reset the table holds %v, want 5 everywhere", got)
		}
		if got, _ := committed(t, adm, group, topic); got[0] != 5 || got[1] != 5 || got[2] != 5 {
			t.Errorf("after the reset the group's copy is %v, want 5 everywhere", got)
		}
	})
}

// stored reads the offsets table's rows of topic.
func stored(t *testing.T, s *pgsink.Sink, topic string) map[record.TopicPartition]int64 {
	t.Helper()
	got, err := s.Offsets(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for tp := range got {
		if tp.Topic != topic {
			delete(got, tp)
		}
	}
	return got
}
