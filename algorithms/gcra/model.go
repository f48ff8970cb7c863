package gcra

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// The Go twin of gcra.lua, with the script's names; integer arithmetic
// below 2^53 only, so the two agree exactly.

var (
	errModelImprecise      = ext.NewServerError("SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds")
	errModelInvalidFill    = ext.NewServerError("SLUICE_INVALID_LIMIT burst x period / rate is too long")
	errModelCostAboveBurst = ext.NewServerError("SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed")
	errModelRefundTooLarge = ext.NewServerError("SLUICE_INVALID_COST a refund cannot exceed burst")
	errModelInvalidState   = ext.NewServerError("SLUICE_INVALID_STATE key does not hold a GCRA state")
)

// emission returns the emission interval and tolerance of a, or the
// script's error.
func emission(a algorithm.Args) (interval, tolerance int64, err error) {
	interval = (a.PeriodUs + a.Rate - 1) / a.Rate
	if (interval*a.Rate-a.PeriodUs)*100 > a.PeriodUs {
		return 0, 0, errModelImprecise
	}
	if interval > algorithm.MaxFillMicros/a.Burst {
		return 0, 0, errModelInvalidFill
	}
	if a.Cost > a.Burst {
		return 0, 0, errModelCostAboveBurst
	}
	if a.Cost < -a.Burst {
		return 0, 0, errModelRefundTooLarge
	}
	return interval, a.Burst * interval, nil
}

func decide(tx sluice.LocalTx, a algorithm.Args, dry bool) ([]int64, error) {
	interval, tolerance, err := emission(a)
	if err != nil {
		return nil, err
	}
	tat := a.Now
	if v, ok := tx.Get(a.Key); ok {
		if v < 0 || v > algorithm.MaxNowMicros+algorithm.MaxFillMicros {
			return nil, errModelInvalidState
		}
		tat = max(tat, v)
	}

	r := algorithm.Reply{Allowed: true}
	store := func() {
		tx.Set(a.Key, tat, algorithm.ExpiryTTL(a.Now, tat))
	}
	if a.Cost < 0 {
		tat = max(tat+a.Cost*interval, a.Now)
		if tat > a.Now {
			store()
		} else {
			tx.Del(a.Key)
		}
	} else {
		newTat := tat + max(a.Cost, 1)*interval
		switch {
		case newTat-a.Now > tolerance:
			r.Allowed = false
			r.RetryAfterUs = newTat - a.Now - tolerance
		case a.Cost > 0 && !dry:
			tat = newTat
			store()
		}
	}
	if tat-a.Now < tolerance {
		r.Remaining = (tolerance - (tat - a.Now)) / interval
	}
	r.ResetAfterUs = tat - a.Now
	return r.Ints(), nil
}
