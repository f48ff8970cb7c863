package tokenbucket

import (
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// The Go twin of tokenbucket.lua, with the script's variable names. Both do
// integer arithmetic below 2^53 only, so they agree exactly.

const (
	maxFillMicros = 316224000000000  // MAX_FILL_US: 10 x 366 days
	maxNowMicros  = 4102444800000000 // MAX_NOW_US: 2100-01-01
	ttlMarginMs   = 1000             // TTL_MARGIN_MS
	maxPeriodUs   = 31622400000000   // 366 days
	maxRateBurst  = 1_000_000_000_000
)

// params are the script's ARGV, parsed.
type params struct {
	rate, periodUs, burst, cost int64
}

// result is the script's reply plus the write it makes, if any.
type result struct {
	allowed      bool
	remaining    int64
	retryAfterUs int64
	deficitUs    int64 // reset_after_us
	write        bool  // whether tat = now + deficitUs is stored
	ttlMs        int64
}

var (
	errModelInvalidKey     = errors.New("SLUICE_INVALID_KEY one non-empty key expected")
	errModelInvalidArgs    = errors.New("SLUICE_INVALID_LIMIT 4 or 5 arguments expected")
	errModelInvalidLimit   = errors.New("SLUICE_INVALID_LIMIT rate, period_us and burst must be integers in range")
	errModelImprecise      = errors.New("SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds")
	errModelInvalidFill    = errors.New("SLUICE_INVALID_LIMIT burst x period / rate is too long")
	errModelInvalidCost    = errors.New("SLUICE_INVALID_COST cost must be an integer in [0, burst]")
	errModelCostAboveBurst = errors.New("SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed")
	errModelInvalidNow     = errors.New("SLUICE_INVALID_LIMIT now_us must be an integer in range")
	errModelInvalidState   = errors.New("SLUICE_INVALID_STATE key does not hold a token bucket")
)

// check validates p as the script does, in the same order, and returns the
// refill interval and the tolerance (both in microseconds).
func (p params) check() (interval, tolerance int64, err error) {
	if p.periodUs < 1000 || p.periodUs > maxPeriodUs || p.rate < 1 || p.rate > min(p.periodUs, maxRateBurst) ||
		p.burst < 1 || p.burst > maxRateBurst {
		return 0, 0, errModelInvalidLimit
	}
	interval = (p.periodUs + p.rate - 1) / p.rate
	if imprecise(p.rate, p.periodUs, interval) {
		return 0, 0, errModelImprecise
	}
	// The script compares interval > MAX_FILL_US / burst in floating point;
	// for integers, x > a/b (real division) is x > floor(a/b).
	if interval > maxFillMicros/p.burst {
		return 0, 0, errModelInvalidFill
	}
	tolerance = p.burst * interval
	if p.cost < 0 || p.cost > maxRateBurst {
		return 0, 0, errModelInvalidCost
	}
	if p.cost > p.burst {
		return 0, 0, errModelCostAboveBurst
	}
	return interval, tolerance, nil
}

// imprecise reports whether rounding the refill interval up to whole
// microseconds lowers the rate by more than 1%.
func imprecise(rate, periodUs, interval int64) bool {
	return (interval*rate-periodUs)*100 > periodUs
}

// decide is the script's decision: tat is the stored state (ok false when
// the key is missing), now the time in Unix microseconds.
func decide(p params, interval, tolerance, tat int64, ok bool, now int64) result {
	var deficit int64
	if ok {
		deficit = max(tat-now, 0)
	}
	need := max(p.cost, 1)

	var r result
	after := deficit + need*interval
	if after <= tolerance {
		r.allowed = true
		if p.cost > 0 {
			deficit = after
			r.write = true
			r.ttlMs = (deficit+999)/1000 + ttlMarginMs
		}
	} else {
		r.retryAfterUs = after - tolerance
	}
	if deficit < tolerance {
		r.remaining = (tolerance - deficit) / interval
	}
	r.deficitUs = deficit
	return r
}

// runLocal is the script's LocalFunc: the same validation, decision and
// write, on an in-process store.
func runLocal(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
	if len(keys) != 1 || keys[0] == "" {
		return nil, errModelInvalidKey
	}
	if len(args) != 4 && len(args) != 5 {
		return nil, errModelInvalidArgs
	}
	p := params{rate: args[0], periodUs: args[1], burst: args[2], cost: args[3]}
	interval, tolerance, err := p.check()
	if err != nil {
		return nil, err
	}
	now := tx.NowMicros()
	if len(args) == 5 {
		now = args[4]
		if now < 0 || now > maxNowMicros {
			return nil, errModelInvalidNow
		}
	}
	tat, ok := tx.Get(keys[0])
	if ok && (tat < 0 || tat > maxNowMicros+maxFillMicros) {
		return nil, errModelInvalidState
	}
	r := decide(p, interval, tolerance, tat, ok, now)
	if r.write {
		tx.Set(keys[0], now+r.deficitUs, time.Duration(r.ttlMs)*time.Millisecond)
	}
	return r.reply(), nil
}

func (r result) reply() []int64 {
	var allowed int64
	if r.allowed {
		allowed = 1
	}
	return []int64{allowed, r.remaining, r.retryAfterUs, r.deficitUs}
}
