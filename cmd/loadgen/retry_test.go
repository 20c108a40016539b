package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// retryFor tries again while try asks for it and the wait lasts, stops
// at once on a failure for good, and gives up past the wait with one
// line that names what it waited for and wraps the last error.
func TestRetryFor(t *testing.T) {
	ctx := context.Background()
	down, refused := errors.New("connection refused"), errors.New("schema refused")

	n := 0
	err := retryFor(ctx, time.Minute, "the registry", func() (bool, error) {
		if n++; n < 3 {
			return true, down
		}
		return false, nil
	})
	if err != nil || n != 3 {
		t.Errorf("succeeding at the third attempt: %v after %d attempts, want nil after 3", err, n)
	}

	n = 0
	err = retryFor(ctx, time.Minute, "the registry", func() (bool, error) { n++; return false, refused })
	if err != refused || n != 1 {
		t.Errorf("a failure for good: %v after %d attempts, want %v after 1", err, n, refused)
	}

	n = 0
	err = retryFor(ctx, 0, "the registry", func() (bool, error) { n++; return true, down })
	if !errors.Is(err, down) || n != 1 || err.Error() != "gave up waiting for the registry: connection refused" || strings.Contains(err.Error(), "\n") {
		t.Errorf("past the wait: %q after %d attempts, want one line wrapping %v after 1", err, n, down)
	}

	cctx, cancel := context.WithCancel(ctx)
	n = 0
	err = retryFor(cctx, time.Minute, "the registry", func() (bool, error) {
		n++
		cancel()
		return true, down
	})
	if err != down || n != 1 {
		t.Errorf("ctx ended: %v after %d attempts, want %v after 1", err, n, down)
	}
}
