//go:build !noembedded

package app

import (
	"context"
	"log/slog"

	"github.com/streamproc/processor/cmd/internal/devkafka"
	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/srserver"
)

// embeddedBuilt says whether this build has the embedded broker.
const embeddedBuilt = true

// startEmbeddedBroker starts the in-process broker of
// PROCESSOR_EMBEDDED_BROKER with the processor's topics. A build with the
// tag noembedded leaves it (and kfake) out.
//
// With PROCESSOR_SASL_MECHANISM set, the broker requires SASL and knows one
// user, the processor's (PROCESSOR_SASL_USERNAME with its password), so the
// processor and any other client must authenticate as that user. It does
// not serve TLS (config refuses PROCESSOR_TLS_ENABLED with it).
func startEmbeddedBroker(ctx context.Context, cfg *config.Config, sec *security, log *slog.Logger) (*devkafka.Broker, error) {
	topics := append([]string{}, cfg.InputTopics...)
	if cfg.OutputTopic != "" { // none with the postgres sink
		topics = append(topics, cfg.OutputTopic)
	}
	if cfg.DLQTopic != "" {
		topics = append(topics, cfg.DLQTopic)
	}
	o := devkafka.Options{Addr: cfg.EmbeddedBrokerAddr, Dir: cfg.EmbeddedBrokerDir,
		Partitions: cfg.EmbeddedBrokerPartitions, Topics: topics, ClientOpts: clientConn(cfg, sec)}
	if sec.mechanism != "" {
		o.SASL = &devkafka.SASL{Mechanism: sec.mechanism, User: sec.user, Password: sec.password.Reveal()}
	}
	b, err := devkafka.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	log.Warn("embedded broker started: for trying the processor on one machine, never for production",
		append([]any{"addr", b.Addrs()[0], "dir", cfg.EmbeddedBrokerDir, "topics", topics}, sec.saslAttrs()...)...)
	return b, nil
}

// startEmbeddedRegistry starts the in-process Schema Registry of
// PROCESSOR_EMBEDDED_SCHEMA_REGISTRY, keeping its schemas in
// PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_DIR, and returns how to stop it. A
// build with the tag noembedded leaves it out.
func startEmbeddedRegistry(ctx context.Context, cfg *config.Config, log *slog.Logger) (func(), error) {
	srv, err := srserver.New(srserver.Options{Dir: cfg.EmbeddedSchemaRegistryDir})
	if err != nil {
		return nil, err
	}
	url, err := srv.Start(ctx, cfg.EmbeddedSchemaRegistryAddr)
	if err != nil {
		return nil, err
	}
	log.Info("embedded Schema Registry started: for trying the schema formats only, never for production",
		"url", url, "dir", cfg.EmbeddedSchemaRegistryDir)
	return func() { _ = srv.Close() }, nil
}
