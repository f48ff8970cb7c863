package algorithm

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

var (
	//go:embed lease.lua
	leaseSource string
	//go:embed lease_single.lua
	leaseSingleSource string
	//go:embed lease_batch.lua
	leaseBatchSource string
)

// LeaseScript leases from a bucket algorithm's state (the token bucket's
// and GCRA's, which both hold one integer: the time the bucket is full
// again). KEYS are the state key and its ledger key (LedgerKey); see
// lease.lua for the arguments and the reply.
var LeaseScript = sluice.NewPackedScript(leaseScriptSource(leaseSingleSource), leaseModel)

// LeaseBatchScript runs many lease operations in one call (lease_batch.lua).
var LeaseBatchScript = sluice.NewPackedScript(leaseScriptSource(leaseBatchSource), leaseBatchModel)

// leaseScriptSource is a lease script: what it needs of lib.lua
// (LibFor), lease.lua with state_text.lua's parts written in (a bucket's
// expiry is its state, the time it is full again), then main, the
// script's own part.
func leaseScriptSource(main string) string {
	text, err := tryFillSteps(writeIn(leaseSource, "READ_ARGS", readArgs), "", "", "", "expiry_us = state", false)
	if err != nil {
		panic("algorithm: lease.lua " + err.Error())
	}
	return LibFor(text+main) + text + main
}

// Lease script operations (ARGV[5]).
const (
	leaseTake    = 1
	leaseRelease = 2
)

// LedgerKey names the ledger of the state key stateKey, in the same Redis
// Cluster slot: a key with a hash tag keeps it, and one without is given
// itself as its tag, which hashes as the whole key does. A key with no
// hash tag that contains '}' cannot be so wrapped; its ledger is in
// another slot, which a Redis Cluster refuses (sluice.ErrCrossSlot): build
// keys with sluice.Key.
func LedgerKey(stateKey string) string {
	if i := strings.IndexByte(stateKey, '{'); i >= 0 {
		if j := strings.IndexByte(stateKey[i+1:], '}'); j > 0 {
			return stateKey + ":leases"
		}
	}
	if strings.IndexByte(stateKey, '}') >= 0 {
		return stateKey + ":leases"
	}
	return "{" + stateKey + "}:leases"
}

// leaseEntry is one holder's reservation in a ledger.
type leaseEntry struct{ reserved, expiresUs int64 }

// ledger is a ledger key's value in an in-process store: holder -> entry.
type ledger map[string]leaseEntry

var (
	errModelLeaseKeys  = ext.NewServerError("SLUICE_INVALID_KEY a state key and a ledger key expected")
	errModelLeaseArgs  = ext.NewServerError("SLUICE_INVALID_LIMIT 9 or 10 arguments expected")
	errModelLeaseOp    = ext.NewServerError("SLUICE_INVALID_COST op, cost, extra, held and hold_us must be integers in range")
	errModelHolder     = ext.NewServerError("SLUICE_INVALID_COST holder must be a positive integer")
	errModelInterval   = ext.NewServerError("SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds")
	errModelFill       = ext.NewServerError("SLUICE_INVALID_LIMIT burst x period / rate is too long")
	errModelLeaseBurst = ext.NewServerError("SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed")
	errModelBucket     = ext.NewServerError("SLUICE_INVALID_STATE key does not hold a bucket")
	errModelLedger     = ext.NewServerError("SLUICE_INVALID_STATE ledger does not hold leases")
)

const (
	maxLeaseHoldUs = 3600000000
	leaseTTLMargin = 1000 // ms: a ledger lives this long after its last reservation ends
	// leaseShare is lease.lua's LEASE_SHARE: see leaseGrant.
	leaseShare = 4
)

// leaseGrant is the lease rule (written out in lease.lua): how many of extra
// tokens a holder holding held is granted when the bucket has left after
// the request's cost and others other holders hold live leases of the key.
// After the grant the holder's unspent tokens are at most
// 1/(leaseShare+others) of those plus what the bucket has left, so the
// bucket keeps at least three times what any one holder holds, and the
// more processes lease a key, the smaller each lease.
func leaseGrant(extra, burst, left, held, others int64) int64 {
	most := (left+held)/(leaseShare+others) - held
	if most <= 0 {
		return 0
	}
	return min(extra, burst, most)
}

// leaseModel is lease_single.lua's Go twin.
func leaseModel(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
	if len(keys) != 2 {
		return nil, errModelLeaseKeys
	}
	if len(args) != 9 && len(args) != 10 {
		return nil, errModelLeaseArgs
	}
	now := tx.NowMicros()
	if len(args) == 10 {
		if now = args[9]; now < 0 || now > MaxNowMicros {
			return nil, ErrModelInvalidNow
		}
	}
	return leaseOp(tx, keys[0], keys[1], args[:9], now)
}

var errModelLeaseBatch = ext.NewServerError("SLUICE_INVALID_KEY a state key and a ledger key per operation expected (1 to 256)")

// leaseBatchModel is lease_batch.lua's Go twin.
func leaseBatchModel(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
	m := len(keys) / 2
	if m < 1 || m > MaxBatch || len(keys)%2 != 0 {
		return nil, errModelLeaseBatch
	}
	if len(args) != 9*m && len(args) != 9*m+1 {
		return nil, ext.NewServerError("SLUICE_INVALID_LIMIT 9 arguments per operation expected")
	}
	now := tx.NowMicros()
	if len(args) == 9*m+1 {
		if now = args[9*m]; now < 0 || now > MaxNowMicros {
			return nil, ErrModelInvalidNow
		}
	}
	out := make([]int64, 0, 7*m)
	for i := range m {
		reply, err := leaseOp(tx, keys[2*i], keys[2*i+1], args[9*i:9*i+9], now)
		if err != nil {
			out = append(out, -1, int64(batchErrorCode(err)), 0, 0, 0, 0, 0)
			continue
		}
		out = append(out, reply...)
	}
	return out, nil
}

// leaseOp is lease.lua's lease_op: the same checks in the same order, the
// same decision and the same writes.
func leaseOp(tx sluice.LocalTx, key, ledgerKey string, args []int64, now int64) ([]int64, error) {
	if key == "" || ledgerKey == "" {
		return nil, errModelLeaseKeys
	}
	rate, periodUs, burst := args[0], args[1], args[2]
	if periodUs < 1000 || periodUs > maxPeriodUs || rate < 1 || rate > min(periodUs, maxRateBurst) || burst < 1 || burst > maxRateBurst {
		return nil, ErrModelInvalidLimit
	}
	cost, op, extra, held, holdUs := args[3], args[4], args[5], args[6], args[7]
	if op < 1 || op > 2 || cost < 0 || cost > maxRateBurst || extra < 0 || extra > maxRateBurst ||
		held < 0 || held > maxRateBurst || holdUs < 1000 || holdUs > maxLeaseHoldUs {
		return nil, errModelLeaseOp
	}
	if args[8] < 1 {
		return nil, errModelHolder
	}
	holder := strconv.FormatInt(args[8], 10)
	interval := (periodUs + rate - 1) / rate
	if (interval*rate-periodUs)*100 > periodUs {
		return nil, errModelInterval
	}
	if interval > MaxFillMicros/burst {
		return nil, errModelFill
	}
	if op == leaseTake && cost > burst {
		return nil, errModelLeaseBurst
	}
	tolerance := burst * interval

	var deficit int64
	if tat, ok := tx.Get(key); ok {
		if tat < 0 || tat > MaxNowMicros+MaxFillMicros {
			return nil, errModelBucket
		}
		deficit = max(tat-now, 0)
	}
	var entries ledger
	if v, ok := tx.Load(ledgerKey); ok {
		if entries, ok = v.(ledger); !ok {
			return nil, errModelLedger
		}
	}
	var live, mine, mineExp, others int64
	for h, e := range entries {
		if e.reserved < 0 || e.reserved > maxRateBurst || e.expiresUs < 0 || e.expiresUs > MaxNowMicros+maxLeaseHoldUs {
			return nil, errModelLedger
		}
		if e.expiresUs > now {
			live += e.reserved
			if h == holder {
				mine, mineExp = e.reserved, e.expiresUs
			} else {
				others++
			}
		}
	}
	floor := live * interval
	purged := false
	for _, ej := range entries {
		if ej.expiresUs > now {
			continue
		}
		purged = true
		var s int64
		for _, ek := range entries {
			if ek.expiresUs >= ej.expiresUs {
				s += ek.reserved
			}
		}
		floor = max(floor, s*interval-(now-ej.expiresUs))
	}
	deficit = max(deficit, min(floor, tolerance))

	var allowed, retryAfter, granted int64 = 1, 0, 0
	reserve, reserveExp := mine, mineExp
	spent := false
	if op == leaseRelease {
		back := min(cost, mine)
		deficit = max(deficit-back*interval, 0)
		reserve = 0
		spent = true
	} else {
		held = min(held, mine)
		switch after := deficit + cost*interval; {
		case cost == 0 && deficit+interval > tolerance:
			allowed, retryAfter = 0, deficit+interval-tolerance
			if extra > 0 {
				reserve = held
			}
		case cost == 0:
			if extra > 0 {
				granted = leaseGrant(extra, burst, (tolerance-deficit)/interval, held, others)
				deficit += granted * interval
				spent = true
				reserve = held + granted
				reserveExp = now + holdUs
			}
		case after > tolerance:
			allowed, retryAfter = 0, after-tolerance
			if live+cost > burst {
				var first int64
				for _, e := range entries {
					if e.expiresUs > now && (first == 0 || e.expiresUs < first) {
						first = e.expiresUs
					}
				}
				retryAfter += first - now
			}
			reserve = held
		default:
			granted = leaseGrant(extra, burst, (tolerance-after)/interval, held, others)
			deficit = after + granted*interval
			spent = true
			reserve = held + granted
			if granted > 0 {
				reserveExp = now + holdUs
			}
		}
	}

	changed := purged || reserve != mine
	if spent || changed {
		if deficit > 0 {
			tx.Set(key, now+deficit, ExpiryTTL(now, now+deficit))
		} else {
			tx.Del(key)
		}
	}
	if changed || reserve > 0 && reserveExp != mineExp {
		next := ledger{}
		var last int64
		for h, e := range entries {
			if e.expiresUs > now && h != holder {
				next[h] = e
				last = max(last, e.expiresUs)
			}
		}
		if reserve > 0 {
			next[holder] = leaseEntry{reserve, reserveExp}
			last = max(last, reserveExp)
		}
		if len(next) == 0 {
			tx.Del(ledgerKey)
		} else {
			tx.Store(ledgerKey, next, time.Duration((last-now+999)/1000+leaseTTLMargin)*time.Millisecond)
		}
	}

	var remaining, expires int64
	if deficit < tolerance {
		remaining = (tolerance - deficit) / interval
	}
	if reserve > 0 {
		expires = reserveExp - now
	}
	return []int64{allowed, remaining, retryAfter, deficit, granted, expires, reserve}, nil
}

// LeasingLimiter is a [Limiter] that also serves leases ([ext.Leaser],
// [ext.LeaseBatcher]): the limiter of an algorithm whose Spec.Leases is
// true. It is safe for concurrent use.
type LeasingLimiter struct{ *Limiter }

var (
	_ ext.Leaser       = (*LeasingLimiter)(nil)
	_ ext.LeaseBatcher = (*LeasingLimiter)(nil)
)

// NewLeasing returns a LeasingLimiter for spec on store, or an error if
// spec's state cannot hold reservations (Spec.Leases is false). It does
// no I/O.
func NewLeasing(spec *Spec, store sluice.Store, opts ...Option) (*LeasingLimiter, error) {
	if spec != nil && !spec.Leases {
		return nil, fmt.Errorf("%s: %w: its state holds no reservations (Spec.Leases is false)", spec.Name, sluice.ErrUnsupported)
	}
	l, err := New(spec, store, opts...)
	if err != nil {
		return nil, err
	}
	return &LeasingLimiter{l}, nil
}

// Lease serves [ext.Leaser].
func (l *LeasingLimiter) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	if ctx == nil {
		return ext.Grant{}, sluice.ErrNilContext
	}
	if req.Release {
		return ext.Grant{}, fmt.Errorf("%s: %w: a release goes to Release or LeaseBatch, not Lease", l.spec.Name, sluice.ErrInvalidCost)
	}
	if err := l.checkLease(req); err != nil {
		return ext.Grant{}, err
	}
	reply, err := l.runLease(ctx, req.Key, req.Limit, req.Cost, leaseTake, req.Extra, req.Held, req.Hold.Microseconds(), req.Holder)
	if err != nil {
		return ext.Grant{}, err
	}
	return l.parseGrant(reply, req)
}

// LeaseBatch runs up to [sluice.MaxBatch] lease requests, takes and
// releases alike, each on a key of its own, in one script call at one
// instant, and answers each as Lease or Release would; the lease decorator
// sends its refills and its janitor's releases so. A bad request fails the
// whole call before anything is sent ([sluice.RequestError]). On Redis
// Cluster all the keys must share a slot; the caller groups them.
func (l *LeasingLimiter) LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	if len(reqs) == 0 || len(reqs) > MaxBatch {
		return nil, fmt.Errorf("%s: %w: a batch holds 1 to %d requests, got %d", l.spec.Name, sluice.ErrInvalidCost, MaxBatch, len(reqs))
	}
	keys := make([]string, 0, 2*len(reqs))
	args := make([]int64, 0, 9*len(reqs)+1)
	seen := make(map[string]bool, len(reqs))
	for i, r := range reqs {
		if err := l.checkLease(r); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: err}
		}
		if seen[r.Key] {
			return nil, &sluice.RequestError{Index: i, Err: fmt.Errorf("%s: %w: key %q appears twice in a lease batch", l.spec.Name, sluice.ErrInvalidKey, r.Key)}
		}
		seen[r.Key] = true
		stateKey := r.Key + l.spec.KeySuffix
		keys = append(keys, stateKey, LedgerKey(stateKey))
		if r.Release {
			args = append(args, r.Limit.Rate, r.Limit.PeriodMicros(), r.Limit.Burst, r.Unspent, leaseRelease, 0, 0, releaseHoldUs, r.Holder)
		} else {
			args = append(args, r.Limit.Rate, r.Limit.PeriodMicros(), r.Limit.Burst, r.Cost, leaseTake, r.Extra, r.Held, r.Hold.Microseconds(), r.Holder)
		}
	}
	args, err := l.appendNow(args)
	if err != nil {
		return nil, err
	}
	reply, err := l.store.Run(ctx, LeaseBatchScript, keys, args)
	if err != nil {
		return nil, fmt.Errorf("%s: lease: %w", l.spec.Name, err)
	}
	if len(reply) != 7*len(reqs) {
		return nil, fmt.Errorf("%s: %w: %d values for %d requests", l.spec.Name, sluice.ErrUnexpectedReply, len(reply), len(reqs))
	}
	results := make([]ext.LeaseResult, len(reqs))
	for i, r := range reqs {
		one := reply[7*i : 7*i+7]
		if one[0] == -1 {
			results[i].Err = fmt.Errorf("request %d: %w", i, l.batchError(one[1]))
			continue
		}
		if r.Release {
			results[i].Decision, results[i].Err = l.parseRelease(one, r.Limit)
		} else {
			results[i].Grant, results[i].Err = l.parseGrant(one, r)
		}
	}
	return results, nil
}

// checkLease validates a lease request as Lease does, or a release as
// Release does.
func (l *Limiter) checkLease(req ext.LeaseRequest) error {
	if !l.spec.Leases {
		return fmt.Errorf("%s: %w: the algorithm cannot lease", l.spec.Name, sluice.ErrUnsupported)
	}
	if err := l.check(req.Key, req.Limit); err != nil {
		return err
	}
	if !req.Release {
		if err := l.validateCost(req.Limit, req.Cost); err != nil {
			return err
		}
	}
	if err := req.CheckLeaseFields(); err != nil {
		return fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	return nil
}

// parseGrant turns a lease reply into a Grant, checking its shape.
func (l *Limiter) parseGrant(reply []int64, req ext.LeaseRequest) (ext.Grant, error) {
	d, err := l.parseReply(reply[:4], req.Limit)
	if err != nil {
		return ext.Grant{}, err
	}
	granted, expires, reserved := reply[4], reply[5], reply[6]
	if granted < 0 || granted > req.Extra || expires < 0 || expires > req.Hold.Microseconds() || !d.Allowed && granted != 0 ||
		reserved < granted || (req.Cost > 0 || req.Extra > 0) && reserved > req.Held+granted || (reserved > 0) != (expires > 0) {
		return ext.Grant{}, fmt.Errorf("%s: %w: %v", l.spec.Name, sluice.ErrUnexpectedReply, reply)
	}
	return ext.Grant{Decision: d, Extra: granted, Reserved: reserved, Expires: time.Duration(expires) * time.Microsecond}, nil
}

// Release serves [ext.Leaser].
func (l *LeasingLimiter) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if err := l.checkLease(ext.LeaseRequest{Key: key, Limit: limit, Holder: holder, Release: true, Unspent: unspent}); err != nil {
		return sluice.Decision{}, err
	}
	reply, err := l.runLease(ctx, key, limit, unspent, leaseRelease, 0, 0, releaseHoldUs, holder)
	if err != nil {
		return sluice.Decision{}, err
	}
	return l.parseRelease(reply, limit)
}

// releaseHoldUs is the hold_us a release sends: the script checks it for
// every operation, and a release does not use it.
const releaseHoldUs = 1000

// parseRelease turns a release's reply into its Decision, checking its
// shape: allowed, nothing granted or reserved.
func (l *Limiter) parseRelease(reply []int64, limit sluice.Limit) (sluice.Decision, error) {
	d, err := l.parseReply(reply[:4], limit)
	if err != nil {
		return sluice.Decision{}, err
	}
	if !d.Allowed || reply[4] != 0 || reply[5] != 0 || reply[6] != 0 {
		return sluice.Decision{}, fmt.Errorf("%s: %w: %v", l.spec.Name, sluice.ErrUnexpectedReply, reply)
	}
	return d, nil
}

func (l *Limiter) runLease(ctx context.Context, key string, limit sluice.Limit, cost, op, extra, held, holdUs, holder int64) ([]int64, error) {
	args, err := l.appendNow([]int64{limit.Rate, limit.PeriodMicros(), limit.Burst, cost, op, extra, held, holdUs, holder})
	if err != nil {
		return nil, err
	}
	stateKey := key + l.spec.KeySuffix
	reply, err := l.store.Run(ctx, LeaseScript, []string{stateKey, LedgerKey(stateKey)}, args)
	if err != nil {
		return nil, fmt.Errorf("%s: lease: %w", l.spec.Name, err)
	}
	if len(reply) != 7 {
		return nil, fmt.Errorf("%s: %w: %d values, want 7", l.spec.Name, sluice.ErrUnexpectedReply, len(reply))
	}
	return reply, nil
}
