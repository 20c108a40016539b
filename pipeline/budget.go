package pipeline

import (
	"fmt"
	"time"

	"github.com/streamproc/processor/transform"
)

// BudgetError is returned by New and Check when one record's worst case,
// every attempt running to its deadline plus the backoff between
// retries, does not fit the transaction's time budget: such a record
// could never be processed, nor be failed by the policy, within a
// transaction.
type BudgetError struct {
	Worst, Budget time.Duration
	Attempts      int             // 1 + MaxRetries
	PerAttempt    time.Duration   // the longest one attempt may take
	Entry         transform.Entry // the chain entry whose own deadline is PerAttempt; zero when it is TransformTimeout or there is none
}

func (e *BudgetError) Error() string {
	if e.PerAttempt == 0 {
		return fmt.Sprintf("the backoff between one record's %d retries adds up to %s, which does not fit the transaction's time budget of %s",
			e.Attempts-1, e.Worst, e.Budget)
	}
	return fmt.Sprintf("one record may take %s (%d attempts of up to %s each, plus backoff between retries), which does not fit the transaction's time budget of %s",
		e.Worst, e.Attempts, e.PerAttempt, e.Budget)
}

// CheckBudget returns a *BudgetError when one record's retries cannot fit
// the transaction's time budget (New and Check check it). An attempt is
// bounded by TransformTimeout and by the chain's own deadlines (a stage
// with its own deadline may not watch the context).
//
// A record that passes the check is never cut before its own deadlines
// end it: each record may run for the longer of this worst case and half
// the budget, all its attempts together, before it fails under
// the policy (Options.OnError) as the one that holds up the transaction.
func CheckBudget(o Options, chain *transform.Chain) error {
	o.TxnBudget = o.budget()
	worst, per, entry := worstCase(o, chain)
	if worst >= o.TxnBudget {
		return &BudgetError{Worst: worst, Budget: o.TxnBudget, Attempts: o.MaxRetries + 1, PerAttempt: per, Entry: entry}
	}
	return nil
}

// worstCase is the longest one record may take by the configured
// deadlines, every attempt running to its deadline plus the backoff
// between retries; per is the longest attempt, and entry the chain entry
// whose own deadline it is (zero for TransformTimeout or none).
func worstCase(o Options, chain *transform.Chain) (worst, per time.Duration, entry transform.Entry) {
	per, entry = chain.CallTimeout()
	if o.TransformTimeout >= per {
		per, entry = o.TransformTimeout, transform.Entry{}
	}
	worst = time.Duration(o.MaxRetries+1) * per
	for i := range o.MaxRetries {
		worst += retryPolicy().Ceiling(i) // the longest wait the retry may draw
	}
	return worst, per, entry
}

// budgetEnd is when the open transaction must start ending, so that it
// ends before the transaction timeout would abort it and fence us.
func (p *Pipeline) budgetEnd() time.Time {
	return p.s.Begun().Add(p.o.TxnBudget)
}

// budget returns TxnBudget, or its default: four fifths of TransactionTimeout
// (TransactionTimeout itself defaults to a minute).
func (o Options) budget() time.Duration {
	switch {
	case o.TxnBudget > 0:
		return o.TxnBudget
	case o.TransactionTimeout > 0:
		return o.TransactionTimeout * 4 / 5
	}
	return time.Minute * 4 / 5
}
