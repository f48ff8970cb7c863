package fallback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// Defaults, each overridable with an option.
const (
	// DefaultTimeout is the time budget of one call to the store. A
	// decision on a healthy Redis takes well under a millisecond; 50 ms
	// leaves room for a slow network without letting a dead Redis hold
	// requests noticeably.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultFailureThreshold is how many consecutive failures open the
	// breaker.
	DefaultFailureThreshold = 5
	// DefaultCooldown is how long the breaker stays open before letting
	// probes through.
	DefaultCooldown = 5 * time.Second
	// DefaultProbes is how many calls the half-open breaker lets through
	// at once; as many successes close it again.
	DefaultProbes = 3
	// DefaultMaxInFlight bounds the calls outstanding to the store.
	DefaultMaxInFlight = 4096
)

// ErrTimeout is the failure recorded when a call exceeds its budget.
var ErrTimeout = errors.New("fallback: store call exceeded its time budget")

// Limiter decorates a [sluice.Limiter] with a timeout budget, a circuit
// breaker and a fallback policy: AllowN, AllowBatch, Lease and LeaseBatch
// go to the wrapped limiter through all three, and the policy decides what
// the store cannot, a LeaseBatch's releases excepted; Refund, Reset and
// Release go within the time budget only, and Capacity is the wrapped
// limiter's. It serves every capability the wrapped limiter serves, and is
// safe for concurrent use.
type Limiter struct {
	next        sluice.Limiter
	policy      Policy
	timeout     time.Duration
	cooldown    time.Duration
	inFlight    chan struct{}
	maxInFlight int
	breaker     *breaker
	detached    bool
}

var _ sluice.Limiter = (*Limiter)(nil)

// New returns a Limiter that decorates next. It does no I/O.
func New(next sluice.Limiter, opts ...Option) (*Limiter, error) {
	if err := ext.RequireNext("fallback", next); err != nil {
		return nil, err
	}
	c := config{
		policy:      Open(),
		timeout:     DefaultTimeout,
		threshold:   DefaultFailureThreshold,
		cooldown:    DefaultCooldown,
		probes:      DefaultProbes,
		maxInFlight: DefaultMaxInFlight,
		clock:       sluice.SystemClock{},
	}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("fallback: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	l := &Limiter{
		next:        next,
		policy:      c.policy,
		timeout:     c.timeout,
		cooldown:    c.cooldown,
		detached:    c.detached,
		maxInFlight: c.maxInFlight,
	}
	l.inFlight = make(chan struct{}, l.maxInFlight)
	l.breaker = &breaker{clock: c.clock, threshold: c.threshold, cooldown: c.cooldown, probes: c.probes, onChange: c.onChange}
	return l, nil
}

// Stats is the state of a Limiter now.
type Stats struct {
	// Breaker is the circuit breaker's state.
	Breaker BreakerState
	// InFlight is how many calls to the wrapped limiter are in flight.
	InFlight int
}

// Stats returns the state of the Limiter now.
func (l *Limiter) Stats() Stats {
	return Stats{Breaker: l.breaker.current(), InFlight: len(l.inFlight)}
}

// AllowN decides through the store when it can, and by the policy when it
// cannot; see the package documentation for the order of operations.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if err := ext.ValidateKey(key); err != nil {
		return sluice.Decision{}, fmt.Errorf("fallback: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	var d sluice.Decision
	stored, err := l.through(ctx, func(ctx context.Context) error {
		var err error
		d, err = l.next.AllowN(ctx, key, limit, n)
		return err
	})
	switch {
	case err != nil:
		return sluice.Decision{}, err // the algorithm refused bad input, or the caller's context ended
	case stored:
		return d, nil
	}
	// Bad input is an error whatever the state of the store: before any
	// policy decides, the wrapped algorithm's own rules (the store, when
	// it answers, applies them itself; checking once is enough).
	if err := ext.CheckRequest(l.next, key, limit, n); err != nil {
		return sluice.Decision{}, fmt.Errorf("fallback: %w", err)
	}
	return l.policy.decide(ctx, l, key, limit, n)
}

// AllowBatch decides a batch through the store when it can, as one call
// within the time budget and the breaker, and each request by the policy
// when it cannot. It needs a wrapped limiter that takes batches.
func (l forwarded) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.BatchLimiter]("fallback", l.next)
	if err != nil {
		return nil, err
	}
	if len(reqs) < 1 || len(reqs) > sluice.MaxBatch {
		return nil, fmt.Errorf("fallback: a batch holds 1 to %d requests, got %d", sluice.MaxBatch, len(reqs))
	}
	for i, r := range reqs {
		if err := ext.CheckRequest(l.next, r.Key, r.Limit, r.N); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: fmt.Errorf("fallback: %w", err)}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []sluice.Result
	stored, err := l.through(ctx, func(ctx context.Context) error {
		var err error
		out, err = inner.AllowBatch(ctx, reqs)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case stored:
		return out, nil
	}
	results := make([]sluice.Result, len(reqs))
	for i, r := range reqs {
		results[i].Decision, results[i].Err = l.policy.decide(ctx, l.Limiter, r.Key, r.Limit, r.N)
	}
	return results, nil
}

// through makes one call to the store, within the time budget, the
// in-flight bound and the breaker. It reports stored when the call
// succeeded; an error the caller must return (the caller's context ended,
// or a configuration error); and neither when the policy must decide.
func (l *Limiter) through(ctx context.Context, call func(context.Context) error) (stored bool, err error) {
	stored, _, err = l.try(ctx, call)
	return stored, err
}

// try is through that also returns the store's failure when the policy
// must decide: the call's error (ErrTimeout when it ran out of budget),
// or nil when no call was made (the breaker or the in-flight bound kept
// it from the store).
func (l *Limiter) try(ctx context.Context, call func(context.Context) error) (stored bool, failure, err error) {
	done, ok := l.breaker.allow()
	if !ok { // open, or half-open with its probes taken
		return false, nil, nil
	}
	select {
	case l.inFlight <- struct{}{}:
	default:
		// Not the store's failure: the callers already in flight are
		// what the store is answering (or not), and their outcomes count.
		done(errExcluded)
		return false, nil, nil
	}

	start := time.Now() // the runtime's time, as the context's deadline is
	callCtx, cancel := context.WithTimeout(ctx, l.timeout)
	var callErr error
	if l.detached {
		callErr = l.detach(ctx, callCtx, call)
	} else {
		callErr = call(callCtx)
		<-l.inFlight
	}
	cancel()

	switch {
	case callErr == nil:
		done(nil)
		return true, nil, nil
	case ctx.Err() != nil:
		done(errExcluded) // the caller gave up: says nothing about the store
		return false, nil, ctx.Err()
	case l.cutByCaller(ctx, start, callErr):
		// The caller's deadline, shorter than the budget, cut the call
		// (the clients say "i/o timeout" a moment before ctx is done): it
		// is the caller's error, and says nothing about the store.
		done(errExcluded)
		return false, nil, context.DeadlineExceeded
	case IsConfigError(callErr):
		done(errExcluded) // not the store's health: surface it, do not trip
		return false, nil, callErr
	}
	done(callErr)
	return false, callErr, nil
}

// detach runs call on a goroutine of its own under callCtx and waits for
// it until callCtx is done (WithDetachedCalls). The call's in-flight slot
// is freed when it returns.
func (l *Limiter) detach(ctx, callCtx context.Context, call func(context.Context) error) error {
	result := make(chan error, 1)
	go func() {
		defer func() { <-l.inFlight }()
		result <- call(callCtx)
	}()
	select {
	case err := <-result:
		return err
	case <-callCtx.Done():
		// The call may still complete; its slot is released when it does.
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrTimeout
	}
}

// cutByCaller reports whether a call started at start failed because the
// caller's own deadline, earlier than the time budget's, cut it: a timeout
// once that deadline has passed or is upon it.
func (l *Limiter) cutByCaller(ctx context.Context, start time.Time, err error) bool {
	deadline, ok := ctx.Deadline()
	if !ok || !deadline.Before(start.Add(l.timeout)) {
		return false // the budget, not the caller, bounded the call
	}
	return (ext.IsTimeout(err) || errors.Is(err, ErrTimeout)) && !time.Now().Add(time.Millisecond).Before(deadline)
}

// As finds the optional interfaces the wrapped limiter serves (see
// [sluice.As]): the Limiter serves them too, through itself.
func (l *Limiter) As(target any) bool { return ext.Forward(target, l.next, forwarded{l}) }

// forwarded holds the methods of the optional interfaces, served only
// when the wrapped limiter serves them.
type forwarded struct{ *Limiter }

// Refund passes a refund to the wrapped limiter, within the time budget
// but not through the breaker or the policy: a refund that fails is an
// error (the tokens stay spent, which errs on the safe side).
func (l forwarded) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	inner, err := ext.Require[sluice.Refunder]("fallback", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	return inner.Refund(ctx, key, limit, n)
}

// Reset passes a reset to the wrapped limiter, within the time budget.
func (l forwarded) Reset(ctx context.Context, key string) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	inner, err := ext.Require[sluice.Resetter]("fallback", l.next)
	if err != nil {
		return err
	}
	return inner.Reset(ctx, key)
}

// Capacity returns the wrapped limiter's capacity.
func (l forwarded) Capacity(key string, limit sluice.Limit) (int64, error) {
	return ext.Capacity(l.next, key, limit)
}

// Lease passes a lease request to the wrapped limiter as AllowN passes a
// request: after validating it, within the time budget, the in-flight
// bound and the breaker. When the store cannot answer, the policy decides
// req.Cost and nothing is leased: the Grant is the policy's Decision alone
// (its Source names the policy), with no Extra, nothing reserved and
// Expires 0, so the holder must stop spending what it held. A release
// request goes to Release or LeaseBatch: Lease refuses it.
func (l forwarded) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	if ctx == nil {
		return ext.Grant{}, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.Leaser]("fallback", l.next)
	if err != nil {
		return ext.Grant{}, err
	}
	if req.Release {
		return ext.Grant{}, fmt.Errorf("fallback: %w: a release goes to Release or LeaseBatch, not Lease", sluice.ErrInvalidCost)
	}
	if err := ext.CheckLease(l.next, req); err != nil {
		return ext.Grant{}, fmt.Errorf("fallback: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return ext.Grant{}, err
	}
	var g ext.Grant
	stored, err := l.through(ctx, func(ctx context.Context) error {
		var err error
		g, err = inner.Lease(ctx, req)
		return err
	})
	switch {
	case err != nil:
		return ext.Grant{}, err
	case stored:
		return g, nil
	}
	d, err := l.policy.decide(ctx, l.Limiter, req.Key, req.Limit, req.Cost)
	if err != nil {
		return ext.Grant{}, err
	}
	return ext.Grant{Decision: d}, nil
}

// LeaseBatch passes many lease requests to the wrapped limiter in one
// call, as Lease passes one: validated first (an invalid request fails the
// call with a [sluice.RequestError] naming it), then within the time
// budget, the in-flight bound and the breaker. When the store cannot
// answer, the policy decides each take's Cost and nothing is leased.
//
// A release ([ext.LeaseRequest.Release]) is never the policy's, as
// Release is not: a batch of releases alone goes within the time budget
// only, and its error is the call's. In a batch with takes, a release
// whose batch failed at the store gets the failure as its error; one
// whose batch the breaker or the in-flight bound kept from the store goes
// with the batch's other releases in a call of their own, within the
// time budget only.
func (l forwarded) LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.LeaseBatcher]("fallback", l.next)
	if err != nil {
		return nil, err
	}
	if len(reqs) < 1 || len(reqs) > sluice.MaxBatch {
		return nil, fmt.Errorf("fallback: a batch holds 1 to %d requests, got %d", sluice.MaxBatch, len(reqs))
	}
	for i, r := range reqs {
		if err := ext.CheckLease(l.next, r); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: fmt.Errorf("fallback: %w", err)}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var released []int // the releases' positions
	for i, r := range reqs {
		if r.Release {
			released = append(released, i)
		}
	}
	if len(released) == len(reqs) {
		return l.releaseBatch(ctx, inner, reqs)
	}
	var out []ext.LeaseResult
	stored, failure, err := l.try(ctx, func(ctx context.Context) error {
		var err error
		out, err = inner.LeaseBatch(ctx, reqs)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case stored:
		return out, nil
	}
	results := make([]ext.LeaseResult, len(reqs))
	for i, r := range reqs {
		if !r.Release {
			results[i].Decision, results[i].Err = l.policy.decide(ctx, l.Limiter, r.Key, r.Limit, r.Cost)
		}
	}
	if len(released) == 0 {
		return results, nil
	}
	if failure == nil { // no call was made: the releases go alone
		rs := make([]ext.LeaseRequest, len(released))
		for j, i := range released {
			rs[j] = reqs[i]
		}
		var out []ext.LeaseResult
		out, failure = l.releaseBatch(ctx, inner, rs)
		if failure == nil {
			for j, i := range released {
				results[i] = out[j]
			}
			return results, nil
		}
	}
	for _, i := range released {
		results[i].Err = failure
	}
	return results, nil
}

// releaseBatch sends a batch of releases to the wrapped limiter as Release
// sends one: within the time budget only.
func (l forwarded) releaseBatch(ctx context.Context, inner ext.LeaseBatcher, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	out, err := inner.LeaseBatch(ctx, reqs)
	if err == nil && len(out) != len(reqs) {
		return nil, fmt.Errorf("fallback: %w: %d results for %d releases", sluice.ErrUnexpectedReply, len(out), len(reqs))
	}
	return out, err
}

// Release passes a release to the wrapped limiter, within the time budget
// but not through the breaker or the policy: a release that fails is an
// error (the tokens stay reserved until the hold ends, which errs on the
// safe side).
func (l forwarded) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	inner, err := ext.Require[ext.Leaser]("fallback", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	return inner.Release(ctx, key, limit, holder, unspent)
}

var (
	_ sluice.BatchLimiter = forwarded{}
	_ sluice.Refunder     = forwarded{}
	_ sluice.Resetter     = forwarded{}
	_ sluice.Bounded      = forwarded{}
	_ ext.Leaser          = forwarded{}
	_ ext.LeaseBatcher    = forwarded{}
)

// IsConfigError reports whether err is a configuration error rather than a
// store failure: invalid input, a key holding data of another kind, a
// reply of an unexpected shape, or a server error whose code says that
// retrying or falling back would only hide a mistake (NOPERM, NOAUTH,
// WRONGPASS, WRONGTYPE, CROSSSLOT). It reads the code of the
// [ext.ServerError] in err's chain, never err's text. Redis's generic ERR
// is a failure: it gives no finer code, and some of its causes pass (too
// many clients).
func IsConfigError(err error) bool {
	for _, target := range []error{sluice.ErrInvalidLimit, sluice.ErrInvalidCost, sluice.ErrInvalidKey, sluice.ErrKeyConflict, sluice.ErrUnexpectedReply, sluice.ErrCrossSlot} {
		if errors.Is(err, target) {
			return true
		}
	}
	switch ext.ServerCode(err) {
	case "NOPERM", "NOAUTH", "WRONGPASS", "WRONGTYPE", "CROSSSLOT":
		return true
	}
	return false
}
