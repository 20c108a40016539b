package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// realState is a *state.Manager as the pipeline's State, as the
// processor's own adapter makes it (cmd/processor/app/stateful.go).
type realState struct{ m *state.Manager }

func (s realState) Begin() (StateTxn, error) {
	t, err := s.m.Begin()
	if err != nil {
		return nil, err
	}
	return realTxn{t}, nil
}
func (s realState) Restore(ctx context.Context, p []int32) error { return s.m.Restore(ctx, p) }
func (s realState) Revoke(p []int32)                             { s.m.Revoke(p) }
func (s realState) Status() any                                  { return s.m.Status() }
func (s realState) Topics() []string                             { return s.m.Topics() }
func (s realState) Journal(max func(string) int) StateJournal {
	return realJournal{&state.Journal{MaxRecordBytes: max}}
}

type realJournal struct{ *state.Journal }

func (j realJournal) Store(t StateTxn, name string, p int32) (transform.Store, error) {
	return j.Journal.Store(t.(realTxn).Txn, name, p)
}

type realTxn struct{ *state.Txn }

func (t realTxn) Store(name string, p int32) (transform.Store, error) { return t.Txn.Store(name, p) }
func (t realTxn) ExpireEach(ctx context.Context, store string, p int32, now time.Time, limit, maxBytes int,
	fn func(key, value []byte, expiry time.Time) error) (int, int, error) {
	return t.Txn.ExpireEach(ctx, store, p, now, limit, maxBytes, func(x state.Expired) error { return fn(x.Key, x.Value, x.Expiry) })
}

// openRealState opens a state store for group in a directory of the
// test's, with its changelogs on e's cluster.
func (e *loopEnv) openRealState(group string) *state.Manager {
	e.t.Helper()
	m, err := state.Open(state.Options{Dir: e.t.TempDir(), Group: group, Stores: []string{"aggregate"}, ClientOpts: e.c.ClientOpts()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = m.Close() })
	if err := m.EnsureChangelogs(context.Background(), e.adm, loopPartitions); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// finals are the committed final rows of topic by input partition and
// key (a key's windows are per input partition, as its state is), as
// "<value> ts=<ms> src=<partition/offset>".
func finals(e *loopEnv, topic string) map[string][]string {
	got := map[string][]string{}
	for _, r := range e.read(topic, true) {
		src := sourceOf(r)
		part, _, _ := strings.Cut(src, "/")
		k := part + "|" + string(r.Key)
		got[k] = append(got[k], fmt.Sprintf("%s ts=%d src=%s", r.Value, r.Timestamp.UnixMilli(), src))
	}
	return got
}

// With EMIT=close, a transaction bound in bytes so small that every poll
// leaves closed windows for later delays final rows but loses none and
// repeats none: the same rows, byte for byte, as without the bound, one
// per key and window closed, through aborts, in small transactions.
func TestCloseBoundedExpiryDelaysNeverLoses(t *testing.T) {
	e := newLoopEnv(t)
	e.c.CreateTopics(t, loopPartitions, nil, "out2", "late", "late2")
	r := rand.New(rand.NewPCG(40, 5))
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	var in []*kgo.Record
	for i := range 1500 {
		ts := base.Add(time.Duration(i) * 100 * time.Millisecond)
		if r.IntN(5) == 0 {
			ts = ts.Add(-time.Duration(r.IntN(20)) * time.Second)
		}
		in = append(in, &kgo.Record{Topic: e.in, Partition: int32(r.IntN(loopPartitions)), Key: []byte("k" + strconv.Itoa(r.IntN(40))),
			Value: []byte("{}"), Timestamp: ts})
	}
	e.produceInputs(in, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	set := map[string]string{"WINDOW": "5s", "GRACE": "5s", "EMIT": "close"}
	run := func(group, out, late string, o Options) {
		m := e.openRealState(group)
		o.State, o.Lineage, o.LateTopic, o.OutputTopic = realState{m}, true, late, out
		o.Chains = []*transform.Chain{settingsChain(t, set, "aggregate")}
		p := e.startWith(group, "t-"+group, settingsChain(t, set, "aggregate"), o, func(so *txn.Options) {
			so.ClientOpts = append(so.ClientOpts, kgo.RecordPartitioner(state.Partitioner(kgo.StickyKeyPartitioner(nil), m.Topics())))
		})
		eventually(t, 60*time.Second, group+" caught up", p, func() bool { return e.caughtUp(group) })
		p.stop(t, 10*time.Second)
	}
	run("free", e.out, "late", Options{MaxRecordsPerTxn: 100000})
	run("bound", "out2", "late2", Options{MaxRecordsPerTxn: 50, MaxTxnBytes: 3000, InjectAbort: func(seq uint64) bool { return seq%5 == 0 }})
	a, b := finals(e, e.out), finals(e, "out2")
	for k, rows := range b {
		if len(rows) != 1 {
			t.Errorf("window %s: %d final rows under the bound: %v", k, len(rows), rows)
		}
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("%d final rows without a bound, %d with it: they differ", len(a), len(b))
	}
	if len(a) < 500 {
		t.Errorf("only %d windows closed: the test shows too little", len(a))
	}
	t.Logf("%d final rows", len(a))
}
