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
// *TimeoutError when timeout is longer. A configuration the principal may
// not describe (no DescribeConfigs ACL) is logged and passes, as does one
// that cannot be read for another reason: the producer ID request that
// follows reaches the same brokers, and its error is the one Init reports
// or retries. A timeout the brokers refuse then still fails there
// (kerr.InvalidTransactionTimeout).
func (lim *limiter) checkTimeout(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeoutCheckBudget)
	defer cancel()
	rcs, err := brokerConfigs(ctx, lim.admin)
	for _, rc := range rcs {
		if rc.Err != nil {
			err = rc.Err
			continue
		}
		if ms, ok := configInt64(rc, "transaction.max.timeout.ms"); ok && timeout > time.Duration(ms)*time.Millisecond {
			return &TimeoutError{Timeout: timeout, Max: time.Duration(ms) * time.Millisecond}
		}
		return nil
	}
	switch {
	case denied(err):
		lim.log.Warn("may not read the brokers' configuration (DescribeConfigs on the cluster); the transaction timeout is not checked against their transaction.max.timeout.ms before the producer starts",
			"err", err.Error())
	case err != nil:
		lim.log.Debug("cannot read the brokers' transaction.max.timeout.ms; going on", "err", err.Error())
	}
	return nil
}
