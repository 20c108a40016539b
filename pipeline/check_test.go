package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// fixedRoute passes records through and names a fixed destination, as the
// route transform's DEFAULT setting does.
type fixedRoute string

func (fixedRoute) Process(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return append(out, r), nil
}

func (f fixedRoute) Destinations() map[string]string { return map[string]string{"DEFAULT": string(f)} }

// routeChain is a chain of one fixedRoute to topic, entry "route".
func routeChain(t *testing.T, topic string) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("route", transform.Plain("", func() (transform.Transform, error) { return fixedRoute(topic), nil }))
	c, err := reg.Build([]transform.Entry{{Name: "route"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// New and Check, with no session, refuse a fixed destination that is an
// input topic or the dead-letter topic with a *DestinationError naming
// the entry's setting, and accept one that is neither; Check needs no
// metrics, New does.
func TestNewRefusesFixedDestinations(t *testing.T) {
	opts := func() Options {
		return Options{OutputTopic: "out", CommitInterval: time.Second, MaxRecordsPerTxn: 10, InputTopics: []string{"in", "in2"},
			OnError: DeadLetter, DLQTopic: "dlq", Metrics: NewMetrics(prometheus.NewRegistry())}
	}
	for _, c := range []struct {
		topic       string
		refused     bool
		deadLetters bool
	}{{"in2", true, false}, {"dlq", true, true}, {"elsewhere", false, false}} {
		chain := routeChain(t, c.topic)
		_, newErr := New(chain, opts())
		o := opts()
		o.Metrics = nil
		checkErr := Check(chain, o)
		for name, err := range map[string]error{"New": newErr, "Check": checkErr} {
			var de *DestinationError
			switch {
			case !c.refused && err != nil:
				t.Errorf("%s with a fixed destination %q: %v, want no error", name, c.topic, err)
			case c.refused && (!errors.As(err, &de) || de.DeadLetters != c.deadLetters || de.Destination.Setting != "DEFAULT" ||
				de.Destination.Topic != c.topic || !strings.Contains(err.Error(), c.topic)):
				t.Errorf("%s with a fixed destination %q: %v, want a *DestinationError with DeadLetters %v naming it", name, c.topic, err, c.deadLetters)
			}
		}
	}
	o := opts()
	o.Metrics = nil
	if _, err := New(routeChain(t, "elsewhere"), o); err == nil || !strings.Contains(err.Error(), "Metrics") {
		t.Errorf("New without metrics = %v, want an error naming Metrics", err)
	}
}

// Before Run is handed a session, a pipeline answers Healthy (nil: not
// started), Ready (false) and Status (no group, not ready, no aborts)
// from any goroutine, as the status page may ask while it connects.
func TestStatusBeforeRun(t *testing.T) {
	p, err := New(loopChain(t, passThrough), Options{OutputTopic: "out", CommitInterval: time.Second, MaxRecordsPerTxn: 10,
		Metrics: NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy before Run = %v, want nil", err)
	}
	if p.Ready() {
		t.Error("Ready before Run = true")
	}
	st := p.Status()
	if st.Group != "" || st.Ready || st.Health != "ok" || len(st.Aborts) != 0 || len(st.Chain) != 1 || st.LastError != nil {
		t.Errorf("Status before Run = %+v, want the chain, no group, not ready, healthy, no aborts", st)
	}
}
