package multilimit

import (
	"errors"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/scriptlimit"
)

// The Go twin of multilimit.lua, with the script's names; integer
// arithmetic below 2^53, as the token bucket's.

const ttlMarginMs = 1000

var (
	errModelInvalidCost    = errors.New("SLUICE_INVALID_COST cost must be an integer")
	errModelInvalidKeys    = errors.New("SLUICE_INVALID_KEY one key per limit expected (1 to 16)")
	errModelEmptyKey       = errors.New("SLUICE_INVALID_KEY keys must not be empty")
	errModelInvalidArgs    = errors.New("SLUICE_INVALID_LIMIT 3 arguments per limit expected")
	errModelInvalidLimit   = errors.New("SLUICE_INVALID_LIMIT rate, period_us and burst must be integers in range")
	errModelImprecise      = errors.New("SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds")
	errModelInvalidFill    = errors.New("SLUICE_INVALID_LIMIT burst x period / rate is too long")
	errModelCostAboveBurst = errors.New("SLUICE_COST_EXCEEDS_BURST cost exceeds a burst, so it can never be allowed")
	errModelInvalidNow     = errors.New("SLUICE_INVALID_LIMIT now_us must be an integer in range")
	errModelInvalidState   = errors.New("SLUICE_INVALID_STATE key does not hold a token bucket")
)

type modelLimit struct {
	interval, tolerance, deficit, after, retry int64
}

func runLocal(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
	if len(args) < 2 {
		return nil, errModelInvalidCost
	}
	cost := args[0]
	if cost < 0 || cost > 1e12 {
		return nil, errModelInvalidCost
	}
	m := args[1]
	if m < 1 || m > maxLimits || int64(len(keys)) != m {
		return nil, errModelInvalidKeys
	}
	if int64(len(args)) != 2+3*m && int64(len(args)) != 3+3*m {
		return nil, errModelInvalidArgs
	}
	for _, k := range keys {
		if k == "" {
			return nil, errModelEmptyKey
		}
	}
	limits := make([]modelLimit, m)
	for i := range limits {
		rate, periodUs, burst := args[2+3*i], args[3+3*i], args[4+3*i]
		if periodUs < 1000 || periodUs > 31622400000000 || rate < 1 || rate > min(periodUs, 1e12) || burst < 1 || burst > 1e12 {
			return nil, errModelInvalidLimit
		}
		interval := (periodUs + rate - 1) / rate
		switch {
		case (interval*rate-periodUs)*100 > periodUs:
			return nil, errModelImprecise
		case interval > scriptlimit.MaxFillMicros/burst:
			return nil, errModelInvalidFill
		case cost > burst:
			return nil, errModelCostAboveBurst
		}
		limits[i] = modelLimit{interval: interval, tolerance: burst * interval}
	}
	now := tx.NowMicros()
	if int64(len(args)) == 3+3*m {
		now = args[2+3*m]
		if now < 0 || now > scriptlimit.MaxNowMicros {
			return nil, errModelInvalidNow
		}
	}
	need := max(cost, 1)
	var allowed, denied int64 = 1, 0
	for i := range limits {
		l := &limits[i]
		if tat, ok := tx.Get(keys[i]); ok {
			if tat < 0 || tat > scriptlimit.MaxNowMicros+scriptlimit.MaxFillMicros {
				return nil, errModelInvalidState
			}
			l.deficit = max(tat-now, 0)
		}
		l.after = l.deficit + need*l.interval
		if l.after > l.tolerance {
			l.retry = l.after - l.tolerance
			if allowed == 1 {
				allowed, denied = 0, int64(i+1)
			}
		}
	}
	reply := []int64{allowed, denied}
	for i := range limits {
		l := &limits[i]
		if allowed == 1 {
			l.retry = 0
			if cost > 0 {
				l.deficit = l.after
				tx.Set(keys[i], now+l.deficit, time.Duration((l.deficit+999)/1000+ttlMarginMs)*time.Millisecond)
			}
		}
		var remaining int64
		if l.deficit < l.tolerance {
			remaining = (l.tolerance - l.deficit) / l.interval
		}
		reply = append(reply, remaining, l.retry, l.deficit)
	}
	return reply, nil
}
