package sluicetest

import (
	"time"

	"github.com/sluicehq/sluice"
)

// Step is one call in a conformance vector: move the clock, then ask.
type Step struct {
	Advance time.Duration
	Limit   sluice.Limit // zero: the vector's limit
	Key     string       // "": the vector's key; else a second key
	N       int64
	Refund  bool            // call Refund(N) instead of AllowN(N)
	Want    sluice.Decision // Limit is filled in by the runner
}

// Vector is a hand-worked sequence of decisions, starting at [Epoch] on
// an empty store.
type Vector struct {
	Name  string
	Limit sluice.Limit
	Steps []Step
}
