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
	"os"

	"github.com/streamproc/processor/cmd/internal/devkafka"
	"github.com/streamproc/processor/internal/interrupt"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "host:port to listen on")
	dir := flag.String("dir", "./data/devbroker", "directory for the broker's log")
	partitions := flag.Int("partitions", 6, "partitions of auto-created topics")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	b, err := devkafka.Start(context.Background(), devkafka.Options{Addr: *addr, Dir: *dir, Partitions: int32(*partitions)})
	if err != nil {
		fmt.Fprintf(os.Stderr, "devbroker: %v\n", err)
		os.Exit(1)
	}
	log.Info("devbroker started", "addr", b.Addrs()[0], "dir", *dir)
	ctx, stop := interrupt.Context()
	defer stop()
	<-ctx.Done()
	b.Close()
	log.Info("devbroker stopped; data flushed", "dir", *dir)
}
