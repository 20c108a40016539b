//go:build unix

package interrupt

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// A SIGTERM, and a SIGINT, each end a context of their own; the process
// itself goes on, as the signal is taken.
func TestSignalsEndTheContext(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		ctx, stop := Context()
		if ctx.Err() != nil {
			t.Fatalf("ended before %v: %v", sig, ctx.Err())
		}
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%v did not end the context", sig)
		}
		stop()
	}
}
