package multilimit

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// The Go twins of multilimit's scripts (args.lua, then multilimit.lua or
// multistep.lua): the same checks in the same order, then each
// algorithm's own model (its algorithm.DecideFunc) in two passes.

var (
	errModelInvalidCost  = ext.NewServerError("SLUICE_INVALID_COST cost must be an integer")
	errModelInvalidKeys  = ext.NewServerError("SLUICE_INVALID_KEY 1 to 16 keys expected, one per limit")
	errModelInvalidArgs  = ext.NewServerError("SLUICE_INVALID_LIMIT 3 arguments per limit expected")
	errModelEmptyKey     = ext.NewServerError("SLUICE_INVALID_KEY keys must not be empty")
	errModelSharedKey    = ext.NewServerError("SLUICE_INVALID_KEY two limits of one call share a state key")
	errModelInvalidLimit = ext.NewServerError("SLUICE_INVALID_LIMIT rate, period_us, burst and algorithm must be integers in range")
	errModelInvalidNow   = ext.NewServerError("SLUICE_INVALID_LIMIT now_us must be an integer in range")
	errModelSecondPass   = ext.NewServerError("SLUICE_INTERNAL a limit decided differently on its second pass")
)

type modelLimit struct {
	spec *algorithm.Spec
	args algorithm.Args
}

// call is a call's arguments, checked as args.lua checks them.
type call struct {
	cost   int64
	limits []modelLimit
}

// parseCall is args.lua's Go twin; accepted says which algorithm ids the
// script takes.
func parseCall(tx sluice.LocalTx, keys []string, args []int64, accepted func(id int64) bool) (call, error) {
	if len(args) < 1 || args[0] < 0 || args[0] > 1e12 {
		return call{}, errModelInvalidCost
	}
	cost := args[0]
	m := len(keys)
	if m < 1 || m > maxLimits {
		return call{}, errModelInvalidKeys
	}
	if len(args) != 1+3*m && len(args) != 2+3*m {
		return call{}, errModelInvalidArgs
	}
	for i, k := range keys {
		if k == "" {
			return call{}, errModelEmptyKey
		}
		for _, earlier := range keys[:i] {
			if earlier == k {
				return call{}, errModelSharedKey
			}
		}
	}
	limits := make([]modelLimit, m)
	for i := range limits {
		rate, periodUs := args[1+3*i], args[2+3*i]
		burst, id := unpackLimit(args[3+3*i])
		if !accepted(id) || periodUs < 1000 || periodUs > 31622400000000 ||
			rate < 1 || rate > min(periodUs, 1e12) || burst < 1 || burst > 1e12 {
			return call{}, errModelInvalidLimit
		}
		limits[i] = modelLimit{spec: specs[id-1], args: algorithm.Args{
			Key: keys[i], Rate: rate, PeriodUs: periodUs, Burst: burst, Cost: cost}}
	}
	now := tx.NowMicros()
	if len(args) == 2+3*m {
		now = args[1+3*m]
		if now < 0 || now > algorithm.MaxNowMicros {
			return call{}, errModelInvalidNow
		}
	}
	for i := range limits {
		limits[i].args.Now = now
	}
	return call{cost: cost, limits: limits}, nil
}

// packLimit is a limit's third argument: burst x 8 + algorithm id.
func packLimit(burst, id int64) int64 { return burst*8 + id }

// unpackLimit is args.lua's reading of packLimit's number: the id is
// v mod 8, floored as Lua's %, so a negative v gives a burst below 1.
func unpackLimit(v int64) (burst, id int64) {
	id = (v%8 + 8) % 8
	return (v - id) / 8, id
}

func anyAlgorithm(id int64) bool { return id >= 1 && id <= int64(len(specs)) }

func steppedAlgorithm(id int64) bool { return anyAlgorithm(id) && specs[id-1].Steps != "" }

// decide is multilimit.lua's Go twin after the arguments: every limit
// dry, then, if all allow a cost, every limit for real. It returns the
// script's reply and each limit's allowed on the dry pass.
func (c call) decide(tx sluice.LocalTx) (reply, allowedDry []int64, err error) {
	m := len(c.limits)
	replies := make([][]int64, m)
	allowedDry = make([]int64, m)
	var allowed, denied int64 = 1, 0
	for i, l := range c.limits {
		r, err := l.spec.Decide(tx, l.args, true)
		if err != nil {
			return nil, nil, err
		}
		if r[0] == 0 && allowed == 1 {
			allowed, denied = 0, int64(i+1)
		}
		replies[i], allowedDry[i] = r, r[0]
	}
	if allowed == 1 && c.cost > 0 {
		for i, l := range c.limits {
			r, err := l.spec.Decide(tx, l.args, false)
			if err != nil || r[0] != 1 {
				return nil, nil, errModelSecondPass
			}
			replies[i] = r
		}
	}
	reply = make([]int64, 0, 2+3*m)
	reply = append(reply, allowed, denied)
	for _, r := range replies {
		reply = append(reply, r[1], r[2], r[3])
	}
	return reply, allowedDry, nil
}

// runLocal is the Go twin of args.lua and multilimit.lua.
func runLocal(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
	c, err := parseCall(tx, keys, args, anyAlgorithm)
	if err != nil {
		return nil, err
	}
	reply, _, err := c.decide(tx)
	return reply, err
}

// runStepLocal is the Go twin of args.lua and multistep.lua: the state
// each limit read, then the same decisions as runLocal's, replied as
// multistep.lua replies.
func runStepLocal(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
	c, err := parseCall(tx, keys, args, steppedAlgorithm)
	if err != nil {
		return nil, err
	}
	now := c.limits[0].args.Now
	reply := make([]int64, len(keys))
	for i, key := range keys {
		if state, ok := tx.Get(key); ok && state > now {
			reply[i] = state - now
		}
	}
	_, allowed, err := c.decide(tx)
	if err != nil {
		return nil, err
	}
	for i := range keys {
		reply[i] = reply[i]*2 + allowed[i]
	}
	return reply, nil
}
