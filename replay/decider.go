package replay

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// decider decides requests under one algorithm and limit on its Go twin:
// the body's DecideFunc, given the arguments the prelude would parse, with
// the request's time as the script's now argument. It is what a Limiter
// built with WithClock sends to Redis, without the round trip.
type decider struct {
	spec     *algorithm.Spec
	args     algorithm.Args // Rate, PeriodUs and Burst set
	capacity int64
	store    *simStore
}

// newDecider checks limit as the algorithm's Limiter would.
func newDecider(name string, limit sluice.Limit) (*decider, error) {
	spec := algorithm.Registered(name)
	if spec == nil {
		return nil, fmt.Errorf("replay: unknown algorithm %q", name)
	}
	if err := spec.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("replay: %s at %s: %w", name, limit, err)
	}
	return &decider{
		spec:     spec,
		args:     algorithm.Args{Rate: limit.Rate, PeriodUs: limit.PeriodMicros(), Burst: limit.Burst},
		capacity: spec.Capacity(limit),
		store:    newSimStore(),
	}, nil
}

// decide decides a request of cost (>= 1) for key at now (Unix
// microseconds, never earlier than the previous call's). A cost above the
// capacity is never allowed and reaches no state, as the Limiter refuses
// it before any script runs; over reports it.
func (d *decider) decide(key string, now, cost int64) (allowed, over bool, err error) {
	if cost > d.capacity {
		return false, true, nil
	}
	d.store.now = now
	a := d.args
	a.Key, a.Cost, a.Now = key, cost, now
	reply, err := d.spec.Decide(d.store, a, false)
	if err != nil {
		return false, false, fmt.Errorf("replay: %s: %w", d.spec.Name, err)
	}
	return reply[0] == 1, false, nil
}

// limitString describes the decider's limit.
func (d *decider) limitString() string {
	return fmt.Sprintf("%d per %s, burst %d", d.args.Rate, time.Duration(d.args.PeriodUs)*time.Microsecond, d.args.Burst)
}
