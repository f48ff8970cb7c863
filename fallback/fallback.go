package fallback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/forward"
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

// BreakerState is the state of the circuit breaker.
type BreakerState int

const (
	// BreakerClosed: calls go to the store.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: a few probe calls go to the store.
	BreakerHalfOpen
	// BreakerOpen: no call goes to the store; the policy decides.
	BreakerOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

// ErrTimeout is the failure recorded when a call exceeds its budget.
var ErrTimeout = errors.New("fallback: store call exceeded its time budget")

// errExcluded is reported to the breaker for an outcome that says nothing
// about the store's health: neither a success nor a failure.
var errExcluded = errors.New("fallback: excluded from the breaker's counts")

// errTooManyInFlight is the failure recorded when the in-flight bound is
// reached.
var errTooManyInFlight = errors.New("fallback: too many calls in flight to the store")

// Limiter decorates a [sluice.Limiter] with a timeout budget, a circuit
// breaker and a fallback policy: AllowN, AllowBatch and Lease go to the
// wrapped limiter through all three, and the policy decides what the store
// cannot; Refund, Reset and Release go within the time budget only, and
// Capacity is the wrapped limiter's. It serves every capability the
// wrapped limiter serves, and is safe for concurrent use.
type Limiter struct {
	next        sluice.Limiter
	policy      Policy
	timeout     time.Duration
	threshold   uint32
	cooldown    time.Duration
	probes      uint32
	onChange    func(from, to BreakerState)
	inFlight    chan struct{}
	maxInFlight int
	breaker     *gobreaker.TwoStepCircuitBreaker[struct{}]
}

var _ sluice.Limiter = (*Limiter)(nil)

// Option configures a [Limiter]. A nil Option is an error, as is an
// option given a bad value.
type Option func(*config) error

type config struct {
	policy      Policy
	timeout     time.Duration
	threshold   uint32
	cooldown    time.Duration
	probes      uint32
	onChange    func(from, to BreakerState)
	maxInFlight int
}

// WithPolicy sets what decides while the store is unavailable. The default
// is [Open].
func WithPolicy(p Policy) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("fallback: WithPolicy(nil): omit the option for Open")
		}
		c.policy = p
		return nil
	}
}

// WithTimeout sets the time budget of one call to the store. The default
// is [DefaultTimeout].
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("fallback: WithTimeout(%s): must be positive", d)
		}
		c.timeout = d
		return nil
	}
}

// WithBreaker sets how many consecutive failures open the breaker, how
// long it stays open, and how many probes it lets through half-open. The
// defaults are [DefaultFailureThreshold], [DefaultCooldown] and
// [DefaultProbes].
func WithBreaker(failures int, cooldown time.Duration, probes int) Option {
	return func(c *config) error {
		if failures < 1 || cooldown <= 0 || probes < 1 {
			return fmt.Errorf("fallback: WithBreaker(%d, %s, %d): each must be positive", failures, cooldown, probes)
		}
		c.threshold, c.cooldown, c.probes = uint32(failures), cooldown, uint32(probes)
		return nil
	}
}

// WithMaxInFlight bounds the calls in flight to the wrapped limiter at
// once (at least 1; default [DefaultMaxInFlight]). Beyond it, the policy
// decides, so that a stalled store cannot pile up goroutines. A call that
// timed out counts until the wrapped limiter returns.
func WithMaxInFlight(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("fallback: WithMaxInFlight(%d): must be at least 1", n)
		}
		c.maxInFlight = n
		return nil
	}
}

// WithStateChange sets a function called once for every change of the
// breaker's state. It must not block.
func WithStateChange(f func(from, to BreakerState)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("fallback: WithStateChange(nil): omit the option to be told nothing")
		}
		c.onChange = f
		return nil
	}
}

// New returns a Limiter that decorates next. It does no I/O.
func New(next sluice.Limiter, opts ...Option) (*Limiter, error) {
	if err := sluice.RequireCapabilities("fallback", next, 0); err != nil {
		return nil, err
	}
	c := config{
		policy:      Open(),
		timeout:     DefaultTimeout,
		threshold:   DefaultFailureThreshold,
		cooldown:    DefaultCooldown,
		probes:      DefaultProbes,
		maxInFlight: DefaultMaxInFlight,
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
		threshold:   c.threshold,
		cooldown:    c.cooldown,
		probes:      c.probes,
		onChange:    c.onChange,
		maxInFlight: c.maxInFlight,
	}
	l.inFlight = make(chan struct{}, l.maxInFlight)
	l.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "sluice",
		MaxRequests: l.probes,
		Timeout:     l.cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= l.threshold },
		IsExcluded:  func(err error) bool { return errors.Is(err, errExcluded) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if l.onChange != nil {
				l.onChange(breakerState(from), breakerState(to))
			}
		},
	})
	return l, nil
}

func breakerState(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// State returns the breaker's current state.
func (l *Limiter) State() BreakerState { return breakerState(l.breaker.State()) }

// AllowN decides through the store when it can, and by the policy when it
// cannot; see the package documentation for the order of operations.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if err := sluice.ValidateKey(key); err != nil {
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
	if err := sluice.CheckRequest(l.next, key, limit, n); err != nil {
		return sluice.Decision{}, fmt.Errorf("fallback: %w", err)
	}
	return l.policy.decide(ctx, l, key, limit, n)
}

// AllowBatch decides a batch through the store when it can, as one call
// within the time budget and the breaker, and each request by the policy
// when it cannot. It needs a wrapped limiter that takes batches.
func (l *Limiter) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	if !sluice.Supports(l.next, sluice.CanBatch) {
		return nil, sluice.Unsupported("fallback", sluice.CanBatch, l.next)
	}
	if len(reqs) < 1 || len(reqs) > sluice.MaxBatch {
		return nil, fmt.Errorf("fallback: a batch holds 1 to %d requests, got %d", sluice.MaxBatch, len(reqs))
	}
	for i, r := range reqs {
		if err := sluice.CheckRequest(l.next, r.Key, r.Limit, r.N); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: fmt.Errorf("fallback: %w", err)}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []sluice.Result
	stored, err := l.through(ctx, func(ctx context.Context) error {
		var err error
		out, err = forward.AllowBatch(ctx, "fallback", l.next, reqs)
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
		results[i].Decision, results[i].Err = l.policy.decide(ctx, l, r.Key, r.Limit, r.N)
	}
	return results, nil
}

// through makes one call to the store, within the time budget, the
// in-flight bound and the breaker. It reports stored when the call
// succeeded; an error the caller must return (the caller's context ended,
// or a configuration error); and neither when the policy must decide.
func (l *Limiter) through(ctx context.Context, call func(context.Context) error) (stored bool, err error) {
	done, err := l.breaker.Allow()
	if err != nil { // open, or half-open with its probes taken
		return false, nil
	}
	select {
	case l.inFlight <- struct{}{}:
	default:
		done(errTooManyInFlight)
		return false, nil
	}

	start := time.Now()
	callCtx, cancel := context.WithTimeout(ctx, l.timeout)
	result := make(chan error, 1)
	go func() {
		defer func() { <-l.inFlight }()
		result <- call(callCtx)
	}()
	var callErr error
	select {
	case callErr = <-result:
	case <-callCtx.Done():
		// The call may still complete; its slot is released when it does.
		callErr = ErrTimeout
		if ctx.Err() != nil {
			callErr = ctx.Err()
		}
	}
	cancel()

	switch {
	case callErr == nil:
		done(nil)
		return true, nil
	case ctx.Err() != nil:
		done(errExcluded) // the caller gave up: says nothing about the store
		return false, ctx.Err()
	case l.cutByCaller(ctx, start, callErr):
		// The caller's deadline, shorter than the budget, cut the call
		// (the clients say "i/o timeout" a moment before ctx is done): it
		// is the caller's error, and says nothing about the store.
		done(errExcluded)
		return false, context.DeadlineExceeded
	case IsConfigError(callErr):
		done(errExcluded) // not the store's health: surface it, do not trip
		return false, callErr
	}
	done(callErr)
	return false, nil
}

// cutByCaller reports whether a call started at start failed because the
// caller's own deadline, earlier than the time budget's, cut it: a timeout
// once that deadline has passed or is upon it.
func (l *Limiter) cutByCaller(ctx context.Context, start time.Time, err error) bool {
	deadline, ok := ctx.Deadline()
	if !ok || !deadline.Before(start.Add(l.timeout)) {
		return false // the budget, not the caller, bounded the call
	}
	return (sluice.IsTimeout(err) || errors.Is(err, ErrTimeout)) && !time.Now().Add(time.Millisecond).Before(deadline)
}

// Capabilities reports what the Limiter serves: what the limiter it wraps
// serves (see [sluice.Capabler]).
func (l *Limiter) Capabilities() sluice.Capability { return sluice.CapabilitiesOf(l.next) }

// Refund passes a refund to the wrapped limiter, within the time budget
// but not through the breaker or the policy: a refund that fails is an
// error (the tokens stay spent, which errs on the safe side).
func (l *Limiter) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return forward.Refund(ctx, "fallback", l.next, key, limit, n)
}

// Reset passes a reset to the wrapped limiter, within the time budget.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return forward.Reset(ctx, "fallback", l.next, key)
}

// Capacity returns the wrapped limiter's capacity.
func (l *Limiter) Capacity(key string, limit sluice.Limit) (int64, error) {
	return forward.Capacity("fallback", l.next, key, limit)
}

// Lease passes a lease request to the wrapped limiter as AllowN passes a
// request: after validating it, within the time budget, the in-flight
// bound and the breaker. When the store cannot answer, the policy decides
// req.Cost and nothing is leased: the Grant is the policy's Decision alone
// (its Source names the policy), with no Extra, nothing reserved and
// Expires 0, so the holder must stop spending what it held.
func (l *Limiter) Lease(ctx context.Context, req sluice.LeaseRequest) (sluice.Grant, error) {
	if ctx == nil {
		return sluice.Grant{}, sluice.ErrNilContext
	}
	if !sluice.Supports(l.next, sluice.CanLease) {
		return sluice.Grant{}, sluice.Unsupported("fallback", sluice.CanLease, l.next)
	}
	if err := sluice.CheckLease(l.next, req); err != nil {
		return sluice.Grant{}, fmt.Errorf("fallback: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sluice.Grant{}, err
	}
	var g sluice.Grant
	stored, err := l.through(ctx, func(ctx context.Context) error {
		var err error
		g, err = forward.Lease(ctx, "fallback", l.next, req)
		return err
	})
	switch {
	case err != nil:
		return sluice.Grant{}, err
	case stored:
		return g, nil
	}
	d, err := l.policy.decide(ctx, l, req.Key, req.Limit, req.Cost)
	if err != nil {
		return sluice.Grant{}, err
	}
	return sluice.Grant{Decision: d}, nil
}

// Release passes a release to the wrapped limiter, within the time budget
// but not through the breaker or the policy: a release that fails is an
// error (the tokens stay reserved until the hold ends, which errs on the
// safe side).
func (l *Limiter) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return forward.Release(ctx, "fallback", l.next, key, limit, holder, unspent)
}

var (
	_ sluice.Capabler     = (*Limiter)(nil)
	_ sluice.BatchLimiter = (*Limiter)(nil)
	_ sluice.Refunder     = (*Limiter)(nil)
	_ sluice.Resetter     = (*Limiter)(nil)
	_ sluice.Bounded      = (*Limiter)(nil)
	_ sluice.Leaser       = (*Limiter)(nil)
)

// IsConfigError reports whether err is a configuration error rather than a
// store failure: invalid input, a key holding data of another kind, or a
// Redis error that retrying or falling back would only hide (NOPERM,
// NOAUTH, WRONGPASS, WRONGTYPE, CROSSSLOT, an unknown command or script
// error).
func IsConfigError(err error) bool {
	for _, target := range []error{sluice.ErrInvalidLimit, sluice.ErrInvalidCost, sluice.ErrInvalidKey, sluice.ErrKeyConflict, sluice.ErrUnexpectedReply} {
		if errors.Is(err, target) {
			return true
		}
	}
	msg := err.Error()
	for _, code := range []string{"NOPERM", "NOAUTH", "WRONGPASS", "WRONGTYPE", "CROSSSLOT", "ERR unknown command", "ERR Error running script", "ERR user_script"} {
		if strings.Contains(msg, code) {
			return true
		}
	}
	return false
}
