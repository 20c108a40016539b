package app

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// kafkaMetrics forwards every hook kprom implements: a hook it lacked would
// silently drop those metrics (franz-go finds hooks by type assertion).
func TestKafkaMetricsHooks(t *testing.T) {
	kp, ours := reflect.ValueOf(new(kprom.Metrics)), reflect.ValueOf(newKafkaMetrics(prometheus.NewRegistry()))
	for i := range kp.NumMethod() {
		name := kp.Type().Method(i).Name
		if !strings.HasPrefix(name, "On") {
			continue
		}
		m := ours.MethodByName(name)
		if !m.IsValid() {
			t.Errorf("kafkaMetrics has no %s, which kprom.Metrics has", name)
			continue
		}
		if want, got := kp.Method(i).Type(), m.Type(); got != want {
			t.Errorf("kafkaMetrics.%s is %s, kprom.Metrics's is %s", name, got, want)
		}
	}
}

// One hook serves client after client, as a txn.Session rebuilds its
// client: each open client's metrics are registered (a second registration
// would panic) and unregistered when it closes.
func TestKafkaMetricsAcrossClients(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	reg := prometheus.NewRegistry()
	hook := newKafkaMetrics(reg)
	kafkaFamilies := func() []string {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "processor_kafka_") {
				names = append(names, mf.GetName())
			}
		}
		return names
	}
	for i := range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.WithHooks(hook))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()
		cancel()
		if err != nil {
			cl.Close()
			t.Fatalf("client %d: producing: %v", i, err)
		}
		names := kafkaFamilies()
		cl.Close()
		if !strings.Contains(strings.Join(names, " "), "processor_kafka_connects_total") {
			t.Errorf("client %d: registered families %v, want processor_kafka_connects_total among them", i, names)
		}
		if left := kafkaFamilies(); len(left) != 0 {
			t.Errorf("client %d: still registered after it closed: %v", i, left)
		}
	}
}
