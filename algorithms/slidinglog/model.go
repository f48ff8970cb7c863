package slidinglog

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// The Go twin of slidinglog.lua, with the script's names. The sorted set
// becomes a sorted slice of scores: members only exist to keep equal scores
// apart, which a slice does by itself.

const (
	ttlMarginMs = 1000
	// MaxRate is the largest Rate a sliding log accepts: it bounds the
	// number of members (one per admitted cost unit) a key holds.
	MaxRate = 10000
)

var (
	errModelRateTooHigh    = ext.NewServerError("SLUICE_INVALID_LIMIT a sliding log allows a rate of at most 10000 per period")
	errModelCostAboveRate  = ext.NewServerError("SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows, so it can never be allowed")
	errModelRefundTooLarge = ext.NewServerError("SLUICE_INVALID_COST a refund cannot exceed the rate")
	errModelInvalidState   = ext.NewServerError("SLUICE_INVALID_STATE key does not hold a sliding log")
)

// log is what the key holds: admitted times, ascending.
type log []int64

func decide(tx sluice.LocalTx, a algorithm.Args, dry bool) ([]int64, error) {
	switch {
	case a.Rate > MaxRate:
		return nil, errModelRateTooHigh
	case a.Cost > a.Rate:
		return nil, errModelCostAboveRate
	case a.Cost < -a.Rate:
		return nil, errModelRefundTooLarge
	}
	var entries log
	if v, ok := tx.Load(a.Key); ok {
		if entries, ok = v.(log); !ok {
			return nil, errModelInvalidState
		}
	}
	oldestOut := a.Now - a.PeriodUs
	// Members in the window are those scored after oldestOut: a suffix.
	first, _ := slices.BinarySearch(entries, oldestOut+1)
	count := int64(len(entries) - first)

	r := algorithm.Reply{Allowed: true}
	write := false
	switch need := max(a.Cost, 1); {
	case a.Cost < 0:
		n := min(-a.Cost, count)
		entries = entries[:len(entries)-int(n)]
		count -= n
		write = true
	case count+need > a.Rate:
		r.Allowed = false
		leaving := count + need - a.Rate
		r.RetryAfterUs = entries[first+int(leaving)-1] + a.PeriodUs - a.Now
	case a.Cost > 0 && !dry:
		kept := make(log, 0, int(count+a.Cost))
		kept = append(kept, entries[first:]...)
		at, _ := slices.BinarySearch(kept, a.Now+1)
		entries = slices.Insert(kept, at, slices.Repeat(log{a.Now}, int(a.Cost))...)
		count += a.Cost
		write = true
	}

	if count > 0 {
		r.ResetAfterUs = entries[len(entries)-1] + a.PeriodUs - a.Now
	}
	if write {
		if count > 0 {
			tx.Store(a.Key, entries, time.Duration((r.ResetAfterUs+999)/1000+ttlMarginMs)*time.Millisecond)
		} else {
			tx.Del(a.Key)
		}
	}
	r.Remaining = max(a.Rate-count, 0)
	return r.Ints(), nil
}
