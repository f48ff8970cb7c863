package sluice

import (
	"fmt"
	"time"
)

// Bounds enforced by [Limit.Validate]. They keep every quantity a script
// computes an exact integer in a Lua number (a float64, exact below 2^53)
// with microsecond timestamps: 2^53 µs is about 285 years.
const (
	// MinPeriod is the shortest Period a Limit may have.
	MinPeriod = time.Millisecond
	// MaxPeriod is the longest Period a Limit may have.
	MaxPeriod = 366 * 24 * time.Hour
	// MaxRate is the largest Rate a Limit may have. Rate is also at most
	// Period in microseconds: one event per microsecond.
	MaxRate = int64(1_000_000_000_000)
	// MaxBurst is the largest Burst a Limit may have.
	MaxBurst = int64(1_000_000_000_000)
	// MaxFillTime is the longest time an empty bucket may take to refill
	// completely: Burst × ceil(Period / Rate), with Period / Rate in whole
	// microseconds.
	MaxFillTime = 10 * 366 * 24 * time.Hour
)

// Limit allows Rate events per Period, with bursts of up to Burst events.
//
// Every algorithm reads the same Limit. For the token bucket, Burst is the
// capacity of the bucket and Rate/Period its refill rate: a client that has
// been idle may send Burst events at once, then Rate events per Period.
//
// The zero Limit is invalid; build one with [PerSecond], [PerMinute],
// [PerHour] or a literal, and check it with [Limit.Validate] (every limiter
// does so on every call).
type Limit struct {
	Rate   int64         // events allowed per Period, >= 1
	Period time.Duration // the period Rate is counted over, >= 1 ms, >= Rate µs; microsecond resolution
	Burst  int64         // the largest number of events allowed at once, >= 1
}

// PerSecond returns a Limit of n events per second with a burst of n.
func PerSecond(n int64) Limit { return Limit{Rate: n, Period: time.Second, Burst: n} }

// PerMinute returns a Limit of n events per minute with a burst of n.
func PerMinute(n int64) Limit { return Limit{Rate: n, Period: time.Minute, Burst: n} }

// PerHour returns a Limit of n events per hour with a burst of n.
func PerHour(n int64) Limit { return Limit{Rate: n, Period: time.Hour, Burst: n} }

// WithBurst returns a copy of l with Burst set to burst.
func (l Limit) WithBurst(burst int64) Limit { l.Burst = burst; return l }

// String returns a short human-readable form such as "100/1m0s burst 20".
func (l Limit) String() string {
	return fmt.Sprintf("%d/%s burst %d", l.Rate, l.Period, l.Burst)
}

// PeriodMicros is Period in whole microseconds, the unit every script uses.
func (l Limit) PeriodMicros() int64 { return l.Period.Microseconds() }

// Validate reports whether l can be enforced. The error wraps
// [ErrInvalidLimit] and names the field at fault.
func (l Limit) Validate() error {
	switch {
	case l.Rate < 1:
		return limitError(l, "rate must be at least 1")
	case l.Rate > MaxRate:
		return limitError(l, fmt.Sprintf("rate must be at most %d", MaxRate))
	case l.Period < MinPeriod:
		return limitError(l, fmt.Sprintf("period must be at least %s", MinPeriod))
	case l.Period > MaxPeriod:
		return limitError(l, fmt.Sprintf("period must be at most %s", MaxPeriod))
	case l.Period%time.Microsecond != 0:
		return limitError(l, "period must be a whole number of microseconds (the scripts' unit), or a fraction would be dropped and the limit enforced above itself")
	case l.Rate > l.PeriodMicros():
		return limitError(l, "rate must be at most one event per microsecond of period (1,000,000 per second)")
	case l.Burst < 1:
		return limitError(l, "burst must be at least 1")
	case l.Burst > MaxBurst:
		return limitError(l, fmt.Sprintf("burst must be at most %d", MaxBurst))
	}
	// Burst × ceil(Period / Rate), in microseconds, as the scripts compute
	// it; compared by division so that the product cannot overflow.
	interval := (l.PeriodMicros() + l.Rate - 1) / l.Rate
	if interval > MaxFillTime.Microseconds()/l.Burst {
		return limitError(l, fmt.Sprintf("burst × period / rate (the time to refill an empty bucket) must be at most %s", MaxFillTime))
	}
	return nil
}

// ValidateCost reports whether a request of cost n can ever be decided
// against l: n must be between 0 and l.Burst. A cost above Burst could never
// be allowed, so it is an error rather than a denial with a retry time that
// would never come true. The error wraps [ErrInvalidCost]; a cost above
// Burst also wraps [ErrCostExceedsBurst]. ValidateCost assumes l is valid.
func (l Limit) ValidateCost(n int64) error {
	switch {
	case n < 0:
		return &CostError{Cost: n, Limit: l, Reason: "cost must not be negative"}
	case n > l.Burst:
		return &CostError{Cost: n, Limit: l, Reason: "cost exceeds burst, so it can never be allowed", Exceeds: true}
	}
	return nil
}

func limitError(l Limit, reason string) error {
	return &LimitError{Limit: l, Reason: reason}
}
