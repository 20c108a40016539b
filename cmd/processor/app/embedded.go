package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
)

// embeddedBroker is franz-go's in-process Kafka-protocol cluster, for trying
// the processor on one machine. It keeps its log under a directory so a
// restart keeps the data. It is not for production: it has one broker, no
// replication, and completes transactions synchronously.
type embeddedBroker struct {
	c *kfake.Cluster
}

func startEmbeddedBroker(ctx context.Context, cfg *config.Config, log *slog.Logger) (*embeddedBroker, error) {
	addr := cfg.EmbeddedBrokerAddr
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.DataDir(cfg.EmbeddedBrokerDir),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(cfg.EmbeddedBrokerPartitions)),
	)
	if err != nil {
		return nil, fmt.Errorf("listening on %s with data in %s: %w", addr, cfg.EmbeddedBrokerDir, err)
	}
	eb := &embeddedBroker{c: c}
	topics := append(append([]string{}, cfg.InputTopics...), cfg.OutputTopic)
	if cfg.DLQTopic != "" {
		topics = append(topics, cfg.DLQTopic)
	}
	if err := eb.ensureTopics(ctx, cfg.EmbeddedBrokerPartitions, topics); err != nil {
		c.Close()
		return nil, err
	}
	log.Warn("embedded broker started: for trying the processor on one machine, never for production",
		"addr", c.ListenAddrs()[0], "dir", cfg.EmbeddedBrokerDir, "topics", topics)
	return eb, nil
}

// ensureTopics creates the topics that do not exist yet.
func (eb *embeddedBroker) ensureTopics(ctx context.Context, partitions int32, topics []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(eb.Addrs()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		return fmt.Errorf("creating topics: %w", err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// Addrs returns the broker's listen addresses.
func (eb *embeddedBroker) Addrs() []string { return eb.c.ListenAddrs() }

// Close stops the broker, flushing its log to disk.
func (eb *embeddedBroker) Close() { eb.c.Close() }
