package algorithm

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

//go:embed batch.lua
var batchSource string

// MaxBatch is the most requests one batch script call decides.
const MaxBatch = sluice.MaxBatch

// newBatchScript returns spec's batch script (batch.lua with spec.Body
// in place of its BODY_DIRECT and BODY_CACHED lines) paired with its Go
// twin.
func newBatchScript(spec *Spec) *sluice.Script {
	source := lib + batchSource
	for _, name := range []string{"body_direct", "body_cached"} {
		source = replaceMarker(source, "-- "+strings.ToUpper(name)+":",
			"local function "+name+"(key, rate, period_us, burst, cost, now, dry)\n"+spec.Body+"\nend\n")
	}
	return sluice.NewScript(source, func(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
		return runBatch(tx, keys, args, spec.Decide)
	})
}

// replaceMarker replaces the comment paragraph that starts with marker
// (up to its blank line) with text.
func replaceMarker(source, marker, text string) string {
	at := strings.Index(source, marker)
	if at < 0 {
		panic("algorithm: batch.lua has no " + marker + " line")
	}
	end := strings.Index(source[at:], "\n\n")
	if end < 0 {
		panic("algorithm: batch.lua's " + marker + " comment has no end")
	}
	return source[:at] + text + source[at+end+1:]
}

// Batch reply error codes (batch.lua).
const (
	batchInvalidLimit = iota + 1
	batchInvalidCost
	batchCostExceedsBurst
	batchInvalidKey
	batchInvalidState
	batchOther
	batchOOM // Redis over maxmemory refused the request's first write
)

var (
	errModelBatchKeys = ext.NewServerError("SLUICE_INVALID_KEY one key per request expected (1 to 256)")
	errModelBatchArgs = ext.NewServerError("SLUICE_INVALID_LIMIT 4 arguments per request expected")
)

// runBatch is batch.lua's Go twin.
func runBatch(tx sluice.LocalTx, keys []string, args []int64, decide DecideFunc) ([]int64, error) {
	if len(args) < 1 || args[0] < 1 || args[0] > MaxBatch || int64(len(keys)) != args[0] {
		return nil, errModelBatchKeys
	}
	m := int(args[0])
	if len(args) != 1+4*m && len(args) != 2+4*m {
		return nil, errModelBatchArgs
	}
	now := tx.NowMicros()
	if len(args) == 2+4*m {
		now = args[1+4*m]
		if now < 0 || now > MaxNowMicros {
			return nil, ErrModelInvalidNow
		}
	}
	reply := make([]int64, 0, 4*m)
	for i, key := range keys {
		a := Args{Key: key, Rate: args[1+4*i], PeriodUs: args[2+4*i], Burst: args[3+4*i], Cost: args[4+4*i], Now: now}
		var r []int64
		var err error
		switch {
		case key == "":
			err = ErrModelInvalidKey
		case a.PeriodUs < 1000 || a.PeriodUs > maxPeriodUs || a.Rate < 1 || a.Rate > min(a.PeriodUs, maxRateBurst) ||
			a.Burst < 1 || a.Burst > maxRateBurst:
			err = ErrModelInvalidLimit
		case a.Cost < -maxRateBurst || a.Cost > maxRateBurst:
			err = ErrModelInvalidCost
		default:
			r, err = decide(tx, a, false)
		}
		if err != nil {
			reply = append(reply, -1, batchErrorCode(err), 0, 0)
			continue
		}
		reply = append(reply, r...)
	}
	return reply, nil
}

// batchCodes pairs each batch error code with the server error code it
// stands for (batch.lua's ERROR_CODES), for both directions of the mapping.
var batchCodes = []struct {
	code   int64
	server string
}{
	{batchInvalidLimit, ext.CodeInvalidLimit}, {batchInvalidCost, ext.CodeInvalidCost},
	{batchCostExceedsBurst, ext.CodeCostExceedsBurst}, {batchInvalidKey, ext.CodeInvalidKey},
	{batchInvalidState, ext.CodeInvalidState}, {batchInvalidState, "WRONGTYPE"},
	{batchOOM, "OOM"},
}

// batchErrorCode is batch.lua's error_code: the batch code of a twin's
// error, by its server code.
func batchErrorCode(err error) int64 {
	code := ext.ServerCode(err)
	for _, c := range batchCodes {
		if c.server == code {
			return c.code
		}
	}
	return batchOther
}

// batchError turns a batch reply's error code into the error AllowN would
// have returned for the request.
func (l *Limiter) batchError(code int64) error {
	if code == batchOOM {
		return fmt.Errorf("%s: %w", l.spec.Name, &ext.ServerError{Code: "OOM",
			Message: "command not allowed when used memory > 'maxmemory' (the request's first write, in a batch)"})
	}
	for _, c := range batchCodes {
		if c.code == code {
			return fmt.Errorf("%s: %w", l.spec.Name, &ext.ServerError{Code: c.server, Message: "the script rejected the request"})
		}
	}
	return fmt.Errorf("%s: %w: batch error code %d", l.spec.Name, sluice.ErrUnexpectedReply, code)
}

// AllowBatch decides reqs in one script call: each as AllowN would, in
// order, at one instant. Every request is validated first; an invalid one
// fails the whole call before anything is sent. On Redis Cluster all the
// keys must share a slot (sluice.Key with one tag); the caller groups them.
func (l *Limiter) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	if len(reqs) == 0 || len(reqs) > MaxBatch {
		return nil, fmt.Errorf("%s: %w: a batch holds 1 to %d requests, got %d", l.spec.Name, sluice.ErrInvalidCost, MaxBatch, len(reqs))
	}
	keys := make([]string, len(reqs))
	args := make([]int64, 1, 2+4*len(reqs))
	args[0] = int64(len(reqs))
	for i, r := range reqs {
		if err := l.check(r.Key, r.Limit); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: err}
		}
		if err := l.validateCost(r.Limit, r.N); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: err}
		}
		keys[i] = r.Key + l.spec.KeySuffix
		args = append(args, r.Limit.Rate, r.Limit.PeriodMicros(), r.Limit.Burst, r.N)
	}
	args, err := l.appendNow(args)
	if err != nil {
		return nil, err
	}
	reply, err := l.store.Run(ctx, l.spec.BatchScript, keys, args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	if len(reply) != 4*len(reqs) {
		return nil, fmt.Errorf("%s: %w: %d values for %d requests", l.spec.Name, sluice.ErrUnexpectedReply, len(reply), len(reqs))
	}
	results := make([]sluice.Result, len(reqs))
	for i, r := range reqs {
		one := reply[4*i : 4*i+4]
		if one[0] == -1 {
			results[i].Err = fmt.Errorf("request %d: %w", i, l.batchError(one[1]))
			continue
		}
		results[i].Decision, results[i].Err = l.parseReply(one, r.Limit)
	}
	return results, nil
}
