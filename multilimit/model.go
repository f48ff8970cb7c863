package multilimit

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// The Go twin of multilimit.lua: the same checks in the same order, then
// each algorithm's own model (its algorithm.DecideFunc) in two passes.

var (
	errModelInvalidCost  = ext.NewServerError("SLUICE_INVALID_COST cost must be an integer")
	errModelInvalidKeys  = ext.NewServerError("SLUICE_INVALID_KEY one key per limit expected (1 to 16)")
	errModelInvalidArgs  = ext.NewServerError("SLUICE_INVALID_LIMIT 4 arguments per limit expected")
	errModelEmptyKey     = ext.NewServerError("SLUICE_INVALID_KEY keys must not be empty")
	errModelSharedKey    = ext.NewServerError("SLUICE_INVALID_KEY two limits of one call share a state key")
	errModelInvalidLimit = ext.NewServerError("SLUICE_INVALID_LIMIT algorithm, rate, period_us and burst must be integers in range")
	errModelInvalidNow   = ext.NewServerError("SLUICE_INVALID_LIMIT now_us must be an integer in range")
	errModelSecondPass   = ext.NewServerError("SLUICE_INTERNAL a limit decided differently on its second pass")
)

type modelLimit struct {
	spec *algorithm.Spec
	args algorithm.Args
}

func runLocal(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
	if len(args) < 1 || args[0] < 0 || args[0] > 1e12 {
		return nil, errModelInvalidCost
	}
	cost := args[0]
	if len(args) < 2 || args[1] < 1 || args[1] > maxLimits || int64(len(keys)) != args[1] {
		return nil, errModelInvalidKeys
	}
	m := int(args[1])
	if len(args) != 2+4*m && len(args) != 3+4*m {
		return nil, errModelInvalidArgs
	}
	for i, k := range keys {
		if k == "" {
			return nil, errModelEmptyKey
		}
		for _, earlier := range keys[:i] {
			if earlier == k {
				return nil, errModelSharedKey
			}
		}
	}
	limits := make([]modelLimit, m)
	for i := range limits {
		id, rate, periodUs, burst := args[2+4*i], args[3+4*i], args[4+4*i], args[5+4*i]
		if id < 1 || id > int64(len(specs)) || periodUs < 1000 || periodUs > 31622400000000 ||
			rate < 1 || rate > min(periodUs, 1e12) || burst < 1 || burst > 1e12 {
			return nil, errModelInvalidLimit
		}
		limits[i] = modelLimit{spec: specs[id-1], args: algorithm.Args{
			Key: keys[i], Rate: rate, PeriodUs: periodUs, Burst: burst, Cost: cost}}
	}
	now := tx.NowMicros()
	if len(args) == 3+4*m {
		now = args[2+4*m]
		if now < 0 || now > algorithm.MaxNowMicros {
			return nil, errModelInvalidNow
		}
	}

	replies := make([][]int64, m)
	var allowed, denied int64 = 1, 0
	for i := range limits {
		l := &limits[i]
		l.args.Now = now
		r, err := l.spec.Decide(tx, l.args, true)
		if err != nil {
			return nil, err
		}
		if r[0] == 0 && allowed == 1 {
			allowed, denied = 0, int64(i+1)
		}
		replies[i] = r
	}
	if allowed == 1 && cost > 0 {
		for i, l := range limits {
			r, err := l.spec.Decide(tx, l.args, false)
			if err != nil || r[0] != 1 {
				return nil, errModelSecondPass
			}
			replies[i] = r
		}
	}
	reply := make([]int64, 0, 2+3*m)
	reply = append(reply, allowed, denied)
	for _, r := range replies {
		reply = append(reply, r[1], r[2], r[3])
	}
	return reply, nil
}
