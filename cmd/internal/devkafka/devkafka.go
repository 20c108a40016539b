// Package devkafka is the one-broker Kafka-protocol cluster (franz-go's
// kfake) that the processor's embedded mode and the devbroker command run
// for trying things on one machine and for fault drills. It keeps its log
// in a directory, so a clean restart keeps the data. It is never for
// production: one broker, no replication.
package devkafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configure a Broker.
type Options struct {
	Addr       string // host:port to listen on
	Dir        string // where the broker keeps its log
	Partitions int32  // partitions of the topics it creates, asked for or not
	Topics     []string
	// SASL, when set, makes the broker require SASL authentication, with
	// one user: this one. nil: no SASL.
	SASL *SASL
	// ClientOpts are how the broker's own client, which creates Topics,
	// connects: with SASL set, it must authenticate as that user
	// (kgo.SASL).
	ClientOpts []kgo.Opt
}

// SASL is the one user of a broker that requires SASL authentication. The
// user is a super user (kfake.Superuser): ACLs do not apply to it.
type SASL struct {
	Mechanism string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	User      string
	Password  string
}

// Broker is a running one-broker cluster.
type Broker struct {
	c *kfake.Cluster
}

// Start starts the broker and creates o.Topics where they do not exist.
func Start(ctx context.Context, o Options) (*Broker, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DataDir(o.Dir),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, o.Addr) }),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(o.Partitions)),
	}
	if o.SASL != nil {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(o.SASL.Mechanism, o.SASL.User, o.SASL.Password))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("listening on %s with data in %s: %w", o.Addr, o.Dir, err)
	}
	b := &Broker{c: c}
	if err := b.ensureTopics(ctx, o.Partitions, o.Topics, o.ClientOpts); err != nil {
		c.Close()
		return nil, err
	}
	return b, nil
}

// ensureTopics creates the topics that do not exist yet.
func (b *Broker) ensureTopics(ctx context.Context, partitions int32, topics []string, clientOpts []kgo.Opt) error {
	if len(topics) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}, clientOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topics...)
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
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Close stops the broker, flushing its log to disk.
func (b *Broker) Close() { b.c.Close() }
