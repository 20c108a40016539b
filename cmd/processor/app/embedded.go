//go:build !noembedded

package app

import (
	"context"
	"log/slog"

	"github.com/streamproc/processor/cmd/internal/devkafka"
	"github.com/streamproc/processor/config"
)

// startEmbeddedBroker starts the in-process broker of
// PROCESSOR_EMBEDDED_BROKER with the processor's topics. A build with the
// tag noembedded leaves it (and kfake) out.
func startEmbeddedBroker(ctx context.Context, cfg *config.Config, log *slog.Logger) (*devkafka.Broker, error) {
	topics := append(append([]string{}, cfg.InputTopics...), cfg.OutputTopic)
	if cfg.DLQTopic != "" {
		topics = append(topics, cfg.DLQTopic)
	}
	b, err := devkafka.Start(ctx, devkafka.Options{Addr: cfg.EmbeddedBrokerAddr, Dir: cfg.EmbeddedBrokerDir,
		Partitions: cfg.EmbeddedBrokerPartitions, Topics: topics})
	if err != nil {
		return nil, err
	}
	log.Warn("embedded broker started: for trying the processor on one machine, never for production",
		"addr", b.Addrs()[0], "dir", cfg.EmbeddedBrokerDir, "topics", topics)
	return b, nil
}
