package app

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
)

// defaultsConfig is the configuration of the declared defaults alone.
func defaultsConfig(t *testing.T) *config.Config {
	t.Helper()
	return config.Defaults()
}

// clientOf creates (and closes at the end of t) a client of opts that
// never connects, to read its options back.
func clientOf(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// The defaults of PROCESSOR_COMPRESSION, _LINGER and _FETCH_MAX_BYTES are
// what the client did before they existed: franz-go's own.
func TestClientDefaultsUnchanged(t *testing.T) {
	bare, ours := clientOf(t), clientOf(t, groupClientOpts(defaultsConfig(t))...)
	for _, opt := range []any{kgo.ProducerBatchCompression, kgo.ProducerLinger, kgo.FetchMaxBytes, kgo.Rack} {
		if b, o := bare.OptValue(opt), ours.OptValue(opt); !reflect.DeepEqual(b, o) {
			t.Errorf("%T: franz-go's default %v, the processor's %v", opt, b, o)
		}
	}
}

// Each setting reaches the group client's options.
func TestGroupClientOpts(t *testing.T) {
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for _, name := range config.Compressions {
		c := defaultsConfig(t)
		c.Compression, c.Linger, c.FetchMaxBytes, c.Rack = name, 25*time.Millisecond, 8<<20, "eu-west-1b"
		cl := clientOf(t, groupClientOpts(c)...)
		want := []kgo.CompressionCodec{kgo.NoCompression()}
		if codec, ok := codecs[name]; ok {
			want = []kgo.CompressionCodec{codec, kgo.NoCompression()}
		}
		if got := cl.OptValue(kgo.ProducerBatchCompression); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: codecs %v, want %v", name, got, want)
		}
		if got := cl.OptValue(kgo.ProducerLinger); got != 25*time.Millisecond {
			t.Errorf("linger %v, want 25ms", got)
		}
		if got := cl.OptValue(kgo.FetchMaxBytes); got != int32(8<<20) {
			t.Errorf("fetch max bytes %v, want 8MiB", got)
		}
		if got := cl.OptValue(kgo.Rack); got != "eu-west-1b" {
			t.Errorf("rack %q, want eu-west-1b", got)
		}
	}
	c := defaultsConfig(t)
	c.ClientID = "orders-enricher-0"
	if got := clientOf(t, clientConn(c, &security{})...).OptValue(kgo.ClientID); got != "orders-enricher-0" {
		t.Errorf("client ID %v, want orders-enricher-0", got)
	}
}

// Each form of PROCESSOR_START_OFFSET is the kgo offset of its meaning.
func TestStartOffsetOf(t *testing.T) {
	now := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	for value, want := range map[string]kgo.Offset{
		"earliest":                 kgo.NewOffset().AtStart(),
		"latest":                   kgo.NewOffset().AtEnd(),
		"-1h":                      kgo.NewOffset().AfterMilli(now.Add(-time.Hour).UnixMilli()),
		"2026-01-02T15:04:05.123Z": kgo.NewOffset().AfterMilli(time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC).UnixMilli()),
	} {
		c := defaultsConfig(t)
		c.StartOffset = value
		if got := startOffset(c, now); got == nil || *got != want {
			t.Errorf("%s: offset %v, want %v", value, got, want)
		}
	}
}
