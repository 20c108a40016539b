package txn

import (
	"context"
	"fmt"
	"time"
)

// TimeoutError is a transaction timeout the brokers refuse: longer than
// their transaction.max.timeout.ms. Init returns it at once, before it
// asks for a producer ID, which the brokers would refuse with
// INVALID_TRANSACTION_TIMEOUT, naming no limit.
type TimeoutError struct {
	Timeout time.Duration // Options.TransactionTimeout
	Max     time.Duration // the brokers' transaction.max.timeout.ms
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("the transaction timeout %s is longer than the brokers' transaction.max.timeout.ms (%s)", e.Timeout, e.Max)
}

// timeoutCheckBudget bounds the read of the brokers' configuration that
// checkTimeout makes, so that brokers slow to answer leave Init's attempt
// the time to ask for a producer ID, whose errors say more.
const timeoutCheckBudget = 5 * time.Second

// checkTimeout reads the brokers' transaction.max.timeout.ms (one
// broker's, as read does for message.max.bytes) and returns a
// *TimeoutError when timeout is longer. A configuration that cannot be
// read passes: the producer ID request that follows reaches the same
// brokers, its error is the one Init reports or retries, and a timeout the
// brokers refuse still fails there (kerr.InvalidTransactionTimeout). When
// the principal may not describe it (no DescribeConfigs ACL), refused says
// why, for the caller to warn once the brokers have accepted the producer:
// a principal refused everything then hears of that alone.
func (lim *limiter) checkTimeout(ctx context.Context, timeout time.Duration) (refused, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeoutCheckBudget)
	defer cancel()
	rcs, err := brokerConfigs(ctx, lim.admin)
	for _, rc := range rcs {
		if rc.Err != nil {
			err = rc.Err
			continue
		}
		if ms, ok := configInt64(rc, "transaction.max.timeout.ms"); ok && timeout > time.Duration(ms)*time.Millisecond {
			return nil, &TimeoutError{Timeout: timeout, Max: time.Duration(ms) * time.Millisecond}
		}
		return nil, nil
	}
	switch {
	case denied(err):
		return err, nil // refused
	case err != nil:
		lim.log.Debug("cannot read the brokers' transaction.max.timeout.ms; going on", "err", err.Error())
	}
	return nil, nil
}

// warnUnchecked warns, once, that the transaction timeout could not be
// checked because the configuration may not be described (denied).
func (lim *limiter) warnUnchecked(denied error) {
	if denied == nil || lim.timeoutWarned {
		return
	}
	lim.timeoutWarned = true
	lim.log.Warn("may not read the brokers' configuration (DescribeConfigs on the cluster); the transaction timeout was not checked against their transaction.max.timeout.ms",
		"err", denied.Error())
}
