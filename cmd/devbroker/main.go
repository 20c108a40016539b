// Command devbroker runs franz-go's kfake Kafka-protocol broker as a process
// of its own, keeping its log in a directory so that a clean restart (SIGTERM,
// then start again) keeps the data. The chaos driver restarts it under
// running processors. It is for development and fault drills, never for
// production: one broker, no replication, and (seen here) a SIGKILL can
// leave its last stable offset stuck after restart, so only clean restarts
// are meaningful.
//
//	devbroker -addr 127.0.0.1:9092 -dir ./data/devbroker
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "host:port to listen on")
	dir := flag.String("dir", "./data/devbroker", "directory for the broker's log")
	partitions := flag.Int("partitions", 6, "partitions of auto-created topics")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.DataDir(*dir),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, *addr) }),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "devbroker: listening on %s with data in %s: %v\n", *addr, *dir, err)
		os.Exit(1)
	}
	log.Info("devbroker started", "addr", c.ListenAddrs()[0], "dir", *dir)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	c.Close()
	log.Info("devbroker stopped; data flushed", "dir", *dir)
}
