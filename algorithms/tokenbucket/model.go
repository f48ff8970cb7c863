package tokenbucket

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// The Go twin of tokenbucket.lua, with the script's variable names. Both do
// integer arithmetic below 2^53 only, so they agree exactly.

var (
	errModelImprecise      = ext.NewServerError("SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds")
	errModelInvalidFill    = ext.NewServerError("SLUICE_INVALID_LIMIT burst x period / rate is too long")
	errModelCostAboveBurst = ext.NewServerError("SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed")
	errModelRefundTooLarge = ext.NewServerError("SLUICE_INVALID_COST a refund cannot exceed burst")
	errModelInvalidState   = ext.NewServerError("SLUICE_INVALID_STATE key does not hold a token bucket")
)

// bucket is a validated decision's constants, in microseconds.
type bucket struct {
	interval  int64 // to refill one token
	tolerance int64 // to refill an empty bucket
	burst     int64
}

// newBucket validates what the script validates after the prelude, in the
// same order.
func newBucket(a algorithm.Args) (bucket, error) {
	interval := (a.PeriodUs + a.Rate - 1) / a.Rate
	switch {
	case (interval*a.Rate-a.PeriodUs)*100 > a.PeriodUs:
		return bucket{}, errModelImprecise
	case interval > algorithm.MaxFillMicros/a.Burst:
		// The script compares with a float division; for integers,
		// x > a/b (real) is x > floor(a/b).
		return bucket{}, errModelInvalidFill
	case a.Cost > a.Burst:
		return bucket{}, errModelCostAboveBurst
	case a.Cost < -a.Burst:
		return bucket{}, errModelRefundTooLarge
	}
	return bucket{interval: interval, tolerance: a.Burst * interval, burst: a.Burst}, nil
}

// result is the script's reply and the deficit it stores, if it writes.
type result struct {
	reply   algorithm.Reply
	deficit int64
	write   bool
}

// take is the script's decision for a request of cost on a bucket whose
// deficit (tat - now, at least 0) is deficit; dry decides without taking.
func (b bucket) take(deficit, cost int64, dry bool) result {
	r := result{reply: algorithm.Reply{Allowed: true}}
	if cost < 0 {
		deficit = max(deficit+cost*b.interval, 0)
		r.write = true
	} else {
		after := deficit + max(cost, 1)*b.interval
		switch {
		case after > b.tolerance:
			r.reply.Allowed = false
			r.reply.RetryAfterUs = after - b.tolerance
		case cost > 0 && !dry:
			deficit = after
			r.write = true
		}
	}
	if deficit < b.tolerance {
		r.reply.Remaining = (b.tolerance - deficit) / b.interval
	}
	r.reply.ResetAfterUs = deficit
	r.deficit = deficit
	return r
}

// decide is the script body's Go twin: the same validation, decision and
// write, on an in-process store.
func decide(tx sluice.LocalTx, a algorithm.Args, dry bool) ([]int64, error) {
	b, err := newBucket(a)
	if err != nil {
		return nil, err
	}
	var deficit int64
	if tat, ok := tx.Get(a.Key); ok {
		if tat < 0 || tat > algorithm.MaxNowMicros+algorithm.MaxFillMicros {
			return nil, errModelInvalidState
		}
		deficit = max(tat-a.Now, 0)
	}
	r := b.take(deficit, a.Cost, dry)
	if r.write {
		if r.deficit > 0 {
			tx.Set(a.Key, a.Now+r.deficit, algorithm.ExpiryTTL(a.Now, a.Now+r.deficit))
		} else {
			tx.Del(a.Key)
		}
	}
	return r.reply.Ints(), nil
}
