package ext

import (
	"fmt"

	"github.com/sluicehq/sluice"
)

// ValidateKey reports whether key can be used: it must not be empty.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: key must not be empty", sluice.ErrInvalidKey)
	}
	return nil
}

// CheckCost reports whether a request of cost n can ever be decided under
// limit by a limiter whose capacity there (see [sluice.Bounded]) is
// capacity: 0 <= n <= capacity.
func CheckCost(limit sluice.Limit, n, capacity int64) error {
	switch {
	case n < 0:
		return &sluice.CostError{Cost: n, Limit: limit, Reason: "cost must not be negative"}
	case n > capacity && capacity == limit.Burst:
		return &sluice.CostError{Cost: n, Limit: limit, Reason: "cost exceeds burst, so it can never be allowed", Exceeds: true}
	case n > capacity:
		return &sluice.CostError{Cost: n, Limit: limit, Exceeds: true,
			Reason: fmt.Sprintf("cost exceeds %d, the most this limiter can ever allow under the limit", capacity)}
	}
	return nil
}

// Capacity returns l's capacity for key under limit when l is
// [sluice.Bounded], and otherwise what [sluice.Limit.Validate] allows:
// limit's Burst, or the limit's error.
func Capacity(l sluice.Limiter, key string, limit sluice.Limit) (int64, error) {
	if b, ok := sluice.As[sluice.Bounded](l); ok {
		return b.Capacity(key, limit)
	}
	if err := limit.Validate(); err != nil {
		return 0, err
	}
	return limit.Burst, nil
}

// CheckRequest validates a request for l: key, then limit and cost by l's
// capacity (see [Capacity]). Decorators call it before anything that does
// not reach the store, so that bad input is an error whatever they decide.
func CheckRequest(l sluice.Limiter, key string, limit sluice.Limit, n int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	capacity, err := Capacity(l, key, limit)
	if err != nil {
		return err
	}
	return CheckCost(limit, n, capacity)
}
