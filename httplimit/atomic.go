package httplimit

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/multilimit"
)

// Atomic is a group of policies checked in one call, all or nothing: a
// request that one policy denies consumes from none. Its policies share
// one key function and one cost, and their Redis keys share the key's hash
// tag (sluice.Key(key, "http", name)), so that one script can check them
// on one Redis Cluster slot.
type Atomic struct {
	// Limiter checks the group (multilimit.New(store)).
	Limiter *multilimit.Limiter
	// Key derives the client's key, for every policy (default
	// RemoteAddr()).
	Key KeyFunc
	// Cost is what one request costs, in every policy (default 1).
	Cost int64
	// Policies are the group's limits, each with its algorithm.
	Policies []AtomicPolicy
	// Routes are the ServeMux patterns of the requests the group applies
	// to; none: every request.
	Routes []string
	// Shadow is a dry run of the group, as [Policy.Shadow]: every request
	// it applies to is checked and counted, all or nothing, exactly as if
	// enforced (under [ext.WithShadow]), and never denied; none of its
	// policies is in a RateLimit, RateLimit-Policy, X-RateLimit-* or
	// Retry-After field. A would-be denial is logged (Info,
	// [ShadowDenialMessage], with the policy that would deny and the
	// key); a request the group cannot key, or a limiter error, is logged
	// and the request goes on.
	Shadow bool
}

// AtomicPolicy is one limit of an [Atomic] group.
type AtomicPolicy struct {
	// Name identifies the policy in the headers and in Redis keys, as
	// [Policy.Name].
	Name string
	// Limit is the policy's limit.
	Limit sluice.Limit
	// Algorithm enforces it (default multilimit.TokenBucket).
	Algorithm multilimit.Algorithm
}

// AtomicMiddleware returns middleware that checks every request the group
// applies to against all its policies in one call. It refuses what it
// could not serve, naming the policy and the field.
func AtomicMiddleware(group Atomic, opts ...Option) (func(http.Handler) http.Handler, error) {
	if group.Limiter == nil {
		return nil, errors.New("httplimit: atomic group: limiter: none given (multilimit.New(store))")
	}
	if len(group.Policies) == 0 {
		return nil, errors.New("httplimit: atomic group: no policy")
	}
	if group.Cost < 0 {
		return nil, fmt.Errorf("httplimit: atomic group: cost: %d is negative", group.Cost)
	}
	if group.Cost == 0 {
		group.Cost = 1
	}
	if group.Key == nil {
		group.Key = RemoteAddr()
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	// Each policy is prepared as a plain one, for its name, routes and
	// quota, with the group's cost, key and routes.
	plain := make([]Policy, len(group.Policies))
	for i, ap := range group.Policies {
		if !ValidPolicyName(ap.Name) {
			return nil, fmt.Errorf("httplimit: atomic policy name %q: use 1 to 64 letters, digits, '-', '_' or '.'", ap.Name)
		}
		if err := ap.Algorithm.Validate(ap.Limit, group.Cost); err != nil {
			return nil, fmt.Errorf("httplimit: atomic policy %q: limit or cost: %w", ap.Name, err)
		}
		plain[i] = Policy{Name: ap.Name, Limiter: unusedLimiter{}, Limit: ap.Limit, Cost: group.Cost, Key: group.Key, Routes: group.Routes}
	}
	ps, err := preparePolicies(plain)
	if err != nil {
		return nil, err
	}
	for i, ap := range group.Policies {
		refills := ap.Algorithm == "" || ap.Algorithm == multilimit.TokenBucket || ap.Algorithm == multilimit.GCRA
		if !refills && ap.Limit.Burst != ap.Limit.Rate {
			return nil, fmt.Errorf("httplimit: atomic policy %q: burst: %d, but %s has no burst (it allows Rate per Period): set it to the rate, %d",
				ap.Name, ap.Limit.Burst, ap.Algorithm, ap.Limit.Rate)
		}
		ps[i].quota = newQuota(ap.Limit, refills)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.serveAtomic(w, r, next, ps, group)
		})
	}, nil
}

func (c *config) serveAtomic(w http.ResponseWriter, r *http.Request, next http.Handler, ps []*policy, group Atomic) {
	if !ps[0].matches(r) {
		next.ServeHTTP(w, r)
		return
	}
	if group.Shadow {
		c.shadowAtomic(r, ps, group)
		next.ServeHTTP(w, r)
		return
	}
	for _, p := range ps {
		c.writePolicy(w, p.Name, p.quota)
	}
	key, err := group.Key(r)
	if err != nil {
		c.keyError(w, r, ps[0].Name, err)
		return
	}
	d, err := group.Limiter.AllowN(r.Context(), atomicChecks(key, ps, group), group.Cost)
	if err != nil {
		c.onError(w, r, err)
		return
	}
	var tightest *outcome
	for i, p := range ps {
		o := &outcome{name: p.Name, quota: p.quota, decision: d.Limits[i]}
		c.writeRateLimit(w, o)
		if tightest == nil || o.decision.Remaining < tightest.decision.Remaining {
			tightest = o
		}
	}
	if !d.Allowed {
		denied := &outcome{name: ps[d.Denied].Name, quota: ps[d.Denied].quota, decision: d.Limits[d.Denied]}
		denied.decision.RetryAfter = d.RetryAfter
		c.deny(w, denied)
		return
	}
	c.writeX(w, tightest)
	next.ServeHTTP(w, r)
}

// atomicChecks are the group's checks for a client's key.
func atomicChecks(key string, ps []*policy, group Atomic) []multilimit.Check {
	checks := make([]multilimit.Check, len(ps))
	for i, p := range ps {
		checks[i] = multilimit.Check{Key: sluice.Key(key, "http", p.Name), Limit: p.Limit, Algorithm: group.Policies[i].Algorithm}
	}
	return checks
}

// shadowAtomic checks r under a shadow group (see [Atomic.Shadow]):
// counted as if enforced, never answered, never written in a header.
func (c *config) shadowAtomic(r *http.Request, ps []*policy, group Atomic) {
	key, err := group.Key(r)
	if err != nil {
		c.logger.Error("httplimit: shadow policy: no key; the request goes on", "policy", ps[0].Name,
			"method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	d, err := group.Limiter.AllowN(ext.WithShadow(r.Context()), atomicChecks(key, ps, group), group.Cost)
	if err != nil {
		c.logger.Error("httplimit: shadow policy: no rate-limit decision; the request goes on", "policy", ps[0].Name,
			"method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	if !d.Allowed {
		c.logger.Info(ShadowDenialMessage, "policy", ps[d.Denied].Name, "key", key, "method", r.Method, "path", r.URL.Path,
			"retry_after", d.RetryAfter, "atomic", true)
	}
}
