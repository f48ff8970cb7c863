package fixedwindow

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// The Go twin of fixedwindow.lua, with the script's names.

const ttlMarginMs = 1000

var (
	errModelCostAboveRate  = ext.NewServerError("SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows, so it can never be allowed")
	errModelRefundTooLarge = ext.NewServerError("SLUICE_INVALID_COST a refund cannot exceed the rate")
	errModelInvalidState   = ext.NewServerError("SLUICE_INVALID_STATE key does not hold a fixed window")
)

// state is what the key holds: "start:count", start being the Unix
// microsecond at which the count's window began.
type state struct{ window, count int64 }

func decide(tx sluice.LocalTx, a algorithm.Args, dry bool) ([]int64, error) {
	switch {
	case a.Cost > a.Rate:
		return nil, errModelCostAboveRate
	case a.Cost < -a.Rate:
		return nil, errModelRefundTooLarge
	}
	window := a.Now / a.PeriodUs * a.PeriodUs // its start
	var count int64
	if v, ok := tx.Load(a.Key); ok {
		s, ok := v.(state)
		if !ok {
			return nil, errModelInvalidState
		}
		// On this period's grid: a different period may have written it.
		if w := s.window / a.PeriodUs * a.PeriodUs; w >= window {
			window, count = w, s.count
		}
	}
	windowEnd := window + a.PeriodUs

	r := algorithm.Reply{Allowed: true}
	write := false
	switch {
	case a.Cost < 0:
		if count > 0 {
			count = max(count+a.Cost, 0)
			write = true
		}
	case count+max(a.Cost, 1) > a.Rate:
		r.Allowed = false
		r.RetryAfterUs = windowEnd - a.Now
	case a.Cost > 0 && !dry:
		count += a.Cost
		write = true
	}
	if write {
		if count > 0 {
			ttl := time.Duration((windowEnd-a.Now+999)/1000+ttlMarginMs) * time.Millisecond
			tx.Store(a.Key, state{window: window, count: count}, ttl)
		} else {
			tx.Del(a.Key)
		}
	}
	if count > 0 {
		r.ResetAfterUs = windowEnd - a.Now
	}
	r.Remaining = max(a.Rate-count, 0)
	return r.Ints(), nil
}
