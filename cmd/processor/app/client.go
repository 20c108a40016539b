package app

import (
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
)

// The Kafka client's settings (PROCESSOR_CLIENT_ID, _COMPRESSION, _LINGER,
// _PRODUCE_BATCH_MAX_BYTES, _FETCH_MAX_BYTES, _RACK, _START_OFFSET) as kgo
// options and txn.Options.

// clientConn are the options of every client the processor makes besides
// the session's (which take txn.Options.ClientID): how to reach the brokers
// (TLS, SASL) and the client ID, so that the brokers see one id for all of
// an instance's requests.
//
// Their metadata is at most 250ms old: franz-go answers an admin request's
// metadata (kadm's ListTopics, ListOffsets) from a cache as old as
// MetadataMinAge, 5s by default, so a changelog or repartition topic just
// created would stay "not yet there" for 5s and hold up the start.
func clientConn(cfg *config.Config, sec *security) []kgo.Opt {
	opts := append(sec.connOpts(), kgo.MetadataMinAge(250*time.Millisecond))
	if cfg.ClientID != "" {
		opts = append(opts, kgo.ClientID(cfg.ClientID))
	}
	return opts
}

// kafkaConn are the options of a one-off client of the cluster: the
// seed brokers and how to reach them. The start (the state's changelogs,
// the repartition topic, the join tables) and the commands (offsets,
// replay) make their admin clients of one, so that all connect alike.
type kafkaConn []kgo.Opt

// dialConn is the kafkaConn of brokers with clientConn's options.
func dialConn(cfg *config.Config, sec *security, brokers []string) kafkaConn {
	return append(kafkaConn{kgo.SeedBrokers(brokers...)}, clientConn(cfg, sec)...)
}

// toolBrokers are the seed brokers of a command on the cluster of a
// processor (PROCESSOR_BROKERS), or, when the processor runs the
// embedded broker, the address that broker listens on.
func toolBrokers(cfg *config.Config) []string {
	if cfg.EmbeddedBroker {
		return []string{cfg.EmbeddedBrokerAddr} // the running processor's
	}
	return cfg.Brokers
}

// admin returns an admin client on c; its Close closes the client it
// made.
func (c kafkaConn) admin() (*kadm.Client, error) {
	cl, err := kgo.NewClient(c...)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// groupClientOpts are the group client's producer and consumer settings:
// compression, linger, the fetch size and the rack.
func groupClientOpts(cfg *config.Config) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ProducerBatchCompression(compression(cfg.Compression)...),
		kgo.ProducerLinger(cfg.Linger),
		kgo.FetchMaxBytes(int32(cfg.FetchMaxBytes)),
	}
	if cfg.Rack != "" {
		opts = append(opts, kgo.Rack(cfg.Rack))
	}
	return opts
}

// compression is the producer's codecs for PROCESSOR_COMPRESSION: the one
// named, then none for brokers too old to take it (franz-go uses the
// first the broker supports). snappy is franz-go's own default.
func compression(name string) []kgo.CompressionCodec {
	var c kgo.CompressionCodec
	switch name {
	case "none":
		return []kgo.CompressionCodec{kgo.NoCompression()}
	case "gzip":
		c = kgo.GzipCompression()
	case "lz4":
		c = kgo.Lz4Compression()
	case "zstd":
		c = kgo.ZstdCompression()
	default: // snappy; Validate refuses any other
		c = kgo.SnappyCompression()
	}
	return []kgo.CompressionCodec{c, kgo.NoCompression()}
}

// startOffset is where the group starts a partition without a committed
// offset, PROCESSOR_START_OFFSET with a duration counted back from now.
func startOffset(cfg *config.Config, now time.Time) *kgo.Offset {
	p := cfg.Start(now)
	o := kgo.NewOffset().AtStart()
	switch {
	case p.Latest:
		o = kgo.NewOffset().AtEnd()
	case !p.At.IsZero():
		o = kgo.NewOffset().AfterMilli(p.At.UnixMilli())
	}
	return &o
}
