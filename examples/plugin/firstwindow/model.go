package firstwindow

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// The Go twin of firstwindow.lua, with the script's names. The framework
// runs it in process (memstore), and the fuzz test holds it to the Lua.

const ttlMarginMs = 1000

var (
	errCostAboveRate  = ext.NewServerError("SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows")
	errRefundTooLarge = ext.NewServerError("SLUICE_INVALID_COST a refund cannot exceed the rate")
	errInvalidState   = ext.NewServerError("SLUICE_INVALID_STATE key does not hold a first-request window")
)

// state is what the key holds: "start:count".
type state struct{ start, count int64 }

func decide(tx sluice.LocalTx, a algorithm.Args, dry bool) ([]int64, error) {
	switch {
	case a.Cost > a.Rate:
		return nil, errCostAboveRate
	case a.Cost < -a.Rate:
		return nil, errRefundTooLarge
	}
	start, count := a.Now, int64(0)
	if v, ok := tx.Load(a.Key); ok {
		s, ok := v.(state)
		if !ok {
			return nil, errInvalidState
		}
		if a.Now < s.start+a.PeriodUs {
			start, count = s.start, s.count
		}
	}
	windowEnd := start + a.PeriodUs

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
			tx.Store(a.Key, state{start: start, count: count}, ttl)
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
