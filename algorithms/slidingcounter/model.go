package slidingcounter

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// The Go twin of slidingcounter.lua, with the script's names. The estimate
// is computed with the same IEEE-754 operations in the same order as the
// script (Lua numbers are float64 too); an explicit float64 conversion
// after each product keeps the compiler from fusing it with an addition.

const ttlMarginMs = 1000

var (
	errModelCostAboveRate  = ext.NewServerError("SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows, so it can never be allowed")
	errModelRefundTooLarge = ext.NewServerError("SLUICE_INVALID_COST a refund cannot exceed the rate")
	errModelInvalidState   = ext.NewServerError("SLUICE_INVALID_STATE key does not hold a sliding window counter")
)

// state is what the key holds: "start:cur:prev", start being the Unix
// microsecond at which the current window began.
type state struct{ window, cur, prev int64 }

// estimator holds a decision's constants.
type estimator struct{ rate, periodUs int64 }

// fits is the script's fits(p, c, e, n).
func (m estimator) fits(p, c, e, n int64) bool {
	weighted := float64(float64(p)*float64(m.periodUs-e)) / float64(m.periodUs)
	return weighted+float64(c)+float64(n) <= float64(m.rate)
}

func decide(tx sluice.LocalTx, a algorithm.Args, dry bool) ([]int64, error) {
	switch {
	case a.Cost > a.Rate:
		return nil, errModelCostAboveRate
	case a.Cost < -a.Rate:
		return nil, errModelRefundTooLarge
	}
	period := a.PeriodUs
	window := a.Now / period * period // its start
	at := a.Now
	var cur, prev int64
	if v, ok := tx.Load(a.Key); ok {
		s, ok := v.(state)
		if !ok {
			return nil, errModelInvalidState
		}
		// On this period's grid: a different period may have written it.
		switch w := s.window / period * period; {
		case w > window:
			window, at = w, w
			cur, prev = s.cur, s.prev
		case w == window:
			cur, prev = s.cur, s.prev
		case w == window-period:
			prev = s.cur
		}
	}
	elapsed := at - window
	m := estimator{rate: a.Rate, periodUs: period}

	need := max(a.Cost, 1)
	r := algorithm.Reply{Allowed: true}
	write := false
	switch {
	case a.Cost < 0:
		if cur > 0 {
			cur = max(cur+a.Cost, 0)
			write = true
		}
	case !m.fits(prev, cur, elapsed, need):
		r.Allowed = false
		if cur+need <= a.Rate {
			e := ceilFloat(float64(period) - float64(float64(a.Rate-cur-need)*float64(period))/float64(prev))
			e = min(max(e, elapsed+1), period)
			for e < period && !m.fits(prev, cur, e, need) {
				e++
			}
			if e < period {
				r.RetryAfterUs = at - a.Now + e - elapsed
			}
		}
		if r.RetryAfterUs == 0 {
			var e int64
			if cur > 0 {
				e = min(max(ceilFloat(float64(period)-float64(float64(a.Rate-need)*float64(period))/float64(cur)), 0), period)
			}
			for e < period && !m.fits(cur, 0, e, need) {
				e++
			}
			r.RetryAfterUs = at - a.Now + period - elapsed + e
		}
	case a.Cost > 0 && !dry:
		cur += a.Cost
		write = true
	}

	if write {
		if cur > 0 || prev > 0 {
			ttl := time.Duration((window+2*period-a.Now+999)/1000+ttlMarginMs) * time.Millisecond
			tx.Store(a.Key, state{window: window, cur: cur, prev: prev}, ttl)
		} else {
			tx.Del(a.Key)
		}
	}

	estimate := float64(float64(prev)*float64(period-elapsed))/float64(period) + float64(cur)
	remaining := max(int64(math.Floor(float64(a.Rate)-estimate)), 0)
	for remaining > 0 && !m.fits(prev, cur, elapsed, remaining) {
		remaining--
	}
	r.Remaining = remaining
	switch {
	case cur > 0:
		r.ResetAfterUs = window + 2*period - a.Now
	case prev > 0:
		r.ResetAfterUs = window + period - a.Now
	}
	return r.Ints(), nil
}

// ceilFloat is Lua's math.ceil on a value known to be within int64 range.
func ceilFloat(x float64) int64 { return int64(math.Ceil(x)) }
