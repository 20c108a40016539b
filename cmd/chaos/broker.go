package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/streamproc/processor/internal/launch"
)

// startBroker starts the devbroker on the drill's address and data
// directory (chosen at the first start) and waits until it listens.
func (d *driver) startBroker() error {
	if d.brokerAddr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		d.brokerAddr = ln.Addr().String()
		ln.Close()
		d.brokerDir = filepath.Join(d.o.logDir, "devbroker-data")
		d.brokers = []string{d.brokerAddr}
	}
	p, err := launch.Start(context.Background(), launch.Command{
		Path: filepath.Join(d.o.bin, "devbroker"), Args: []string{"-addr", d.brokerAddr, "-dir", d.brokerDir},
		Log: filepath.Join(d.o.logDir, "devbroker.log"), Stdout: true,
	})
	if err != nil {
		return err
	}
	d.broker = p
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", d.brokerAddr); err == nil {
			c.Close()
			return nil
		}
	}
	return errors.New("devbroker did not listen within 30s")
}

// stopBroker stops the devbroker cleanly (SIGTERM), keeping its data.
func (d *driver) stopBroker() {
	if d.broker == nil {
		return
	}
	_ = d.broker.Signal(syscall.SIGTERM)
	_ = d.broker.Wait()
	d.broker = nil
}

// restartBroker is the broker fault: a clean restart of the devbroker, or
// SIGKILL and start of one node of the local cluster, the nodes in turn.
func (d *driver) restartBroker() {
	if d.o.embedded {
		d.stopBroker()
		time.Sleep(time.Second)
		if err := d.startBroker(); err != nil {
			fatal(fmt.Errorf("restarting the devbroker: %w", err))
		}
		return
	}
	if !d.o.cluster {
		d.log.Warn("the broker fault needs -embedded or -cluster; skipped")
		return
	}
	node := strconv.Itoa(1 + d.applied["broker"]%3)
	for _, args := range [][]string{{"kill", node}, nil, {"start", node}} {
		if args == nil {
			time.Sleep(3 * time.Second)
			continue
		}
		if out, err := exec.Command("bash", append([]string{d.o.clusterScript}, args...)...).CombinedOutput(); err != nil {
			fatal(fmt.Errorf("%s %s: %v\n%s", d.o.clusterScript, strings.Join(args, " "), err, out))
		}
	}
}
