package config

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The Kafka client's settings: PROCESSOR_CLIENT_ID, _COMPRESSION, _LINGER,
// _PRODUCE_BATCH_MAX_BYTES, _FETCH_MAX_BYTES, _RACK and _START_OFFSET.
// cmd/processor/app turns them into the clients' options.

// Compressions are the values of PROCESSOR_COMPRESSION, as it declares
// them.
var Compressions = choices("COMPRESSION")

// The bounds of the client's sizes. A produce request holds at least one
// batch and the client refuses to write a request over 100MiB (the
// brokers' default socket.request.max.bytes), nor to read a response over
// 100MiB; a fetch of less than 1MiB could not hold one batch of Kafka's
// default largest (message.max.bytes, 1MiB).
const (
	MinProduceBatchBytes = 1 << 10
	MaxProduceBatchBytes = 100 << 20
	MinFetchBytes        = 1 << 20
	MaxFetchBytes        = 100 << 20
)

// DefaultClientID is the client ID of an instance whose PROCESSOR_CLIENT_ID
// is unset: processor-<group>-<instance id>, or processor-<group>-<hostname>
// without static membership, so that two pipelines (groups), and two
// instances of one, never share one.
func DefaultClientID(group, instanceID, hostname string) string {
	if instanceID != "" {
		return "processor-" + group + "-" + instanceID
	}
	return "processor-" + group + "-" + hostname
}

// StartPosition is where the group starts reading a partition it has no
// committed offset for (PROCESSOR_START_OFFSET). The zero value is the
// earliest offset.
type StartPosition struct {
	// Latest: the end of the partition, so only records produced after
	// the start are read.
	Latest bool
	// At, when not zero, is a time: the first record whose timestamp is at
	// or after it.
	At time.Time
}

// Start returns the position PROCESSOR_START_OFFSET names, with a
// duration back counted from now. Validate has checked the setting.
func (c *Config) Start(now time.Time) StartPosition {
	p, _ := parseStart(c.StartOffset, now)
	return p
}

// parseStart reads a PROCESSOR_START_OFFSET value: earliest, latest, a
// negative duration (back from now), or an RFC 3339 time.
func parseStart(s string, now time.Time) (StartPosition, bool) {
	switch s {
	case "earliest":
		return StartPosition{}, true
	case "latest":
		return StartPosition{Latest: true}, true
	}
	if strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s)
		if err != nil || d >= 0 {
			return StartPosition{}, false
		}
		return StartPosition{At: now.Add(d)}, true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return StartPosition{}, false
	}
	return StartPosition{At: t}, true
}

// clientRules are Validate's checks of the Kafka client's settings, made
// after rules (which have checked the group they default from).
var clientRules = []rule{
	{field: "ClientID", when: func(c *Config) bool { return c.ClientID != "" }, ok: func(c *Config) bool { return printable(c.ClientID, 256) }},
	{field: "Linger", ok: func(c *Config) bool { return within(c.Linger, 0, time.Minute) }},
	// Unset (0): each topic's limit.
	{field: "ProduceBatchMaxBytes", when: func(c *Config) bool { return c.ProduceBatchMaxBytes != 0 },
		ok: func(c *Config) bool {
			return within(c.ProduceBatchMaxBytes, MinProduceBatchBytes, MaxProduceBatchBytes)
		}},
	{field: "FetchMaxBytes", ok: func(c *Config) bool { return within(c.FetchMaxBytes, MinFetchBytes, MaxFetchBytes) }},
	{field: "Rack", when: func(c *Config) bool { return c.Rack != "" }, ok: func(c *Config) bool { return printable(c.Rack, 512) }},
	{field: "StartOffset", ok: func(c *Config) bool { _, ok := parseStart(c.StartOffset, time.Now()); return ok }},
}

// printable reports whether s is 1 to max bytes of UTF-8 without control
// characters (a newline in a client ID would end up in the brokers' logs).
func printable(s string, max int) bool {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
