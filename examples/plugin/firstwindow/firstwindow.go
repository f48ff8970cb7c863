// Package firstwindow is a rate-limit algorithm written outside Sluice, on
// its public extension API alone: a fixed window that opens at a key's
// first request (as ulule/limiter's and rate-limiter-flexible's do),
// instead of on a grid of the clock.
//
// The algorithm is its Lua body (firstwindow.lua) and that body's Go twin
// (model.go), given to algorithm.Register; Sluice supplies the argument
// validation, the batch script (so coalesce batches it), the in-process
// run of the twin (memstore) and the limiter. A Limit reads as Rate cost
// units per window of Period; Burst is not used.
package firstwindow

import (
	_ "embed"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext/algorithm"
)

//go:embed firstwindow.lua
var body string

// KeySuffix is appended to the caller's key to name the state's Redis key.
const KeySuffix = ":fw1"

var spec = algorithm.Register(&algorithm.Spec{
	Name:        "firstwindow",
	Body:        body,
	Decide:      decide,
	ResetScript: algorithm.DeleteScript,
	KeySuffix:   KeySuffix,
	Capacity:    func(l sluice.Limit) int64 { return l.Rate },
	// A window's end seen from a clock gone back from 2100 to 1970.
	MaxReplyMicros: algorithm.MaxNowMicros + 366*24*3600*1_000_000,
})

// Script returns the decision script paired with its Go twin.
func Script() *sluice.Script { return spec.Script }

// New returns a first-request window limiter on store. It does no I/O.
// WithClock (algorithm.WithClock) sends the caller's time instead of the
// Redis server's, for tests.
func New(store sluice.Store, opts ...algorithm.Option) (*algorithm.Limiter, error) {
	return algorithm.New(spec, store, opts...)
}
