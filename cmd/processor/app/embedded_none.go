//go:build noembedded

package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/streamproc/processor/config"
)

// embeddedBroker stands in for the broker a noembedded build leaves out.
type embeddedBroker interface {
	Addrs() []string
	Close()
}

// embeddedBuilt says whether this build has the embedded broker: it has
// not, so setUp refuses PROCESSOR_EMBEDDED_BROKER=true as a configuration
// error (exit 2).
const embeddedBuilt = false

// startEmbeddedBroker fails: this build has no embedded broker.
func startEmbeddedBroker(context.Context, *config.Config, *security, *slog.Logger) (embeddedBroker, error) {
	return nil, errors.New("this build has no embedded broker (built with -tags noembedded); set PROCESSOR_BROKERS instead")
}

// startEmbeddedRegistry fails: this build has no embedded Schema Registry.
func startEmbeddedRegistry(context.Context, *config.Config, *slog.Logger) (func(), error) {
	return nil, errors.New("this build has no embedded Schema Registry (built with -tags noembedded); set PROCESSOR_SCHEMA_REGISTRY_URL instead")
}
