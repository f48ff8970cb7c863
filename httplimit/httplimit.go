// Package httplimit is net/http middleware over any [sluice.Limiter].
//
// Each [Policy] names a limiter (any algorithm, any decorators), a limit,
// a cost per request, a key function and, optionally, the routes it
// applies to; [Middleware] checks a request against every policy whose
// routes match it, in order, and the first denial answers. Policies can
// also come from a YAML or JSON file ([Load]), with the same fields. A
// policy's limit can depend on who the client is ([Policy.Tiers]: a free
// and a pro plan, each tier counted apart) and its cost on the route
// ([Policy.Costs]), all on one budget per key.
// [AtomicMiddleware] checks a group of policies in one call instead, all
// or nothing.
//
// Responses carry the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-10) and the common X-RateLimit-*
// headers. A denial is 429 with Retry-After, rounded up, and the draft's
// quota-exceeded problem (RFC 9457). A decision made by a fallback policy
// (the store unavailable) carries no quota figures it does not know, and a
// Closed fallback answers 503 with the breaker's cooldown as Retry-After.
// A limiter error answers 503; a request with no key 400, and a key
// function that cannot work on this server 500. Headers never carry the
// key itself.
//
// A policy in shadow mode ([Policy.Shadow], shadow: true in a file) is
// decided and counted as if it were enforced, but never answers: see
// Shadow for what a client and an operator see of it.
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice"
)

// Policy is one limit applied to requests.
type Policy struct {
	// Name identifies the policy in the RateLimit headers and in Redis
	// keys: letters, digits, '-', '_' or '.', at most 64, unique among the
	// policies of one middleware.
	Name string
	// Limiter decides: any algorithm, with any decorators.
	Limiter sluice.Limiter
	// Limit is the policy's limit, unless it has Tiers. The window
	// algorithms do not use a burst: give them one equal to the rate (as
	// sluice.PerMinute does).
	Limit sluice.Limit
	// Tiers, instead of Limit, are the policy's limits when it depends on
	// who the client is (a free plan and a pro plan): TierOf chooses one
	// per request, DefaultTier when it chooses none. One policy, not one
	// per tier, so that a request is checked once whatever its tier, and
	// each tier counts in a state of its own (the tier's name is in the
	// store key): a client moved to another tier starts on that tier's
	// limit, never on what it spent under another. The RateLimit-Policy,
	// RateLimit and X-RateLimit-* fields state the chosen tier's limit.
	Tiers []Tier
	// TierOf chooses a request's tier among Tiers (required with them).
	// A tier none of Tiers names is an error wrapping [ErrUnknownTier]:
	// 500, logged.
	TierOf TierFunc
	// DefaultTier names the tier of a request TierOf chooses "" for
	// (required with Tiers).
	DefaultTier string
	// Cost is what one request costs (default 1), unless its route is in
	// Costs. It must be one the limiter can ever allow under every limit
	// (at most the burst, or the rate for a window algorithm).
	Cost int64
	// Costs are the costs of particular routes, charged to the same
	// budget as every other request of the policy (one key, one state):
	// a report that costs 10 and a read that costs 1 draw on one limit.
	// A request's route is chosen as ServeMux chooses (the most specific
	// pattern wins); a request in none costs Cost. Each cost must be one
	// every limit of the policy can ever allow.
	Costs []RouteCost
	// Key derives the client's key (default RemoteAddr()).
	Key KeyFunc
	// Routes are the net/http ServeMux patterns ("POST /orders",
	// "/users/{id}") of the requests the policy applies to; none: every
	// request.
	Routes []string
	// Shadow is a dry run: the policy decides every request it applies to
	// and its limiter counts it as it would enforced (its key's state
	// moves the same), but a denial lets the request through. A would-be
	// denial is logged (Info, [ShadowDenialMessage], with the policy, the
	// key, the method, the path, retry_after, source and, with Tiers, the
	// tier) and every decision is made under [ext.WithShadow], so that a
	// sluiceotel layer records it with sluice.shadow=true. The policy is
	// invisible to clients: it never appears in RateLimit-Policy,
	// RateLimit, X-RateLimit-* or Retry-After, whatever it decides, since
	// a client pacing itself by those fields would be limited by a limit
	// not in force, and fields that changed at the would-be denial would
	// tell it. A request it cannot key or tier, or a limiter error, is
	// logged (Error) and the request goes on: a dry run never fails a
	// request.
	Shadow bool
}

// ErrorHandler answers a request whose limit could not be decided.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

type config struct {
	ietf, xHeaders bool
	onError        ErrorHandler
	logger         *slog.Logger
}

// Option configures the middleware. A nil Option is an error, as is an
// option given a bad value.
type Option func(*config) error

// WithoutIETFHeaders turns off the RateLimit and RateLimit-Policy fields.
func WithoutIETFHeaders() Option {
	return func(c *config) error {
		c.ietf = false
		return nil
	}
}

// WithoutXHeaders turns off X-RateLimit-Limit, -Remaining and -Reset.
func WithoutXHeaders() Option {
	return func(c *config) error {
		c.xHeaders = false
		return nil
	}
}

// WithErrorHandler sets what answers when a limiter returns an error
// (default: 503 and a logged error).
func WithErrorHandler(h ErrorHandler) Option {
	return func(c *config) error {
		if h == nil {
			return errors.New("httplimit: WithErrorHandler(nil): omit the option for the default handler")
		}
		c.onError = h
		return nil
	}
}

// WithLogger sets the logger of the default error handler and of key
// functions that cannot work on this server (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("httplimit: WithLogger(nil): omit the option for slog.Default()")
		}
		c.logger = l
		return nil
	}
}

func newConfig(opts []Option) (*config, error) {
	c := &config{ietf: true, xHeaders: true, logger: slog.Default()}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("httplimit: option %d is nil", i)
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.onError == nil {
		logger := c.logger
		c.onError = func(w http.ResponseWriter, r *http.Request, err error) {
			logger.Error("httplimit: no rate-limit decision", "method", r.Method, "path", r.URL.Path, "err", err)
			writeProblem(w, http.StatusServiceUnavailable, problem{Type: "about:blank", Title: "Service Unavailable",
				Detail: "the rate limiter is unavailable"})
		}
	}
	return c, nil
}

// Middleware returns middleware that checks every request against the
// policies whose routes match it, in order. It refuses, naming the policy
// and the field, what it could not serve: a bad or duplicate name, no
// limiter, a limit or cost the limiter refuses, a burst given to an
// algorithm that has none, a bad route pattern.
func Middleware(policies []Policy, opts ...Option) (func(http.Handler) http.Handler, error) {
	if len(policies) == 0 {
		return nil, errors.New("httplimit: no policy")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	ps, err := preparePolicies(policies)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.serve(w, r, next, ps)
		})
	}, nil
}

func (c *config) serve(w http.ResponseWriter, r *http.Request, next http.Handler, ps []*policy) {
	var applicable []*policy
	for _, p := range ps {
		if p.matches(r) {
			applicable = append(applicable, p)
		}
	}
	if len(applicable) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	// Each enforced policy's key, tier and cost first: the tier decides
	// the quota that RateLimit-Policy states. A request that one policy
	// cannot key is answered before any policy counts it.
	targets := make([]target, len(applicable))
	var failed *policy
	var failure error
	for i, p := range applicable {
		if p.Shadow {
			continue
		}
		if targets[i], failure = p.target(r); failure != nil {
			failed = p
			break
		}
	}
	// The policies that apply are announced whatever the outcome, so that
	// RateLimit-Policy does not change on a denial; shadow ones never are,
	// nor a tiered one whose tier is not known.
	for i, p := range applicable {
		switch {
		case p.Shadow:
		case p.tiers == nil:
			c.writePolicy(w, p.Name, p.quota)
		case targets[i].storeKey != "":
			c.writePolicy(w, p.Name, targets[i].quota)
		}
	}
	if failed != nil {
		c.keyError(w, r, failed.Name, failure)
		return
	}
	var tightest *outcome
	for i, p := range applicable {
		if p.Shadow {
			c.shadow(r, p)
			continue
		}
		t := targets[i]
		d, err := p.Limiter.AllowN(r.Context(), t.storeKey, t.limit, t.cost)
		if err != nil {
			c.onError(w, r, err)
			return
		}
		o := &outcome{name: p.Name, quota: t.quota, decision: d}
		c.writeRateLimit(w, o)
		if !d.Allowed {
			c.deny(w, o)
			return
		}
		if !d.Degraded() && (tightest == nil || d.Remaining < tightest.decision.Remaining) {
			tightest = o
		}
	}
	c.writeX(w, tightest)
	next.ServeHTTP(w, r)
}

// keyError answers a request the policy could not key: 500 when the key
// function cannot work on this server, 400 when the request lacks what it
// reads. A tier function's errors are answered alike, and an unknown tier
// is the server's: 500.
func (c *config) keyError(w http.ResponseWriter, r *http.Request, policy string, err error) {
	if errors.Is(err, ErrUnknownTier) {
		c.logger.Error("httplimit: rate limiting is misconfigured", "policy", policy, "method", r.Method, "path", r.URL.Path, "err", err)
		writeProblem(w, http.StatusInternalServerError, problem{Type: "about:blank", Title: "Internal Server Error",
			Detail: fmt.Sprintf("rate limiting is misconfigured on this server: policy %q cannot choose the request's tier", policy)})
		return
	}
	if errors.Is(err, ErrKeyMisconfigured) {
		c.logger.Error("httplimit: rate limiting is misconfigured", "policy", policy, "method", r.Method, "path", r.URL.Path, "err", err)
		writeProblem(w, http.StatusInternalServerError, problem{Type: "about:blank", Title: "Internal Server Error",
			Detail: fmt.Sprintf("rate limiting is misconfigured on this server: policy %q cannot key requests", policy)})
		return
	}
	writeProblem(w, http.StatusBadRequest, problem{Type: "about:blank", Title: "Bad Request",
		Detail: fmt.Sprintf("the request carries no rate-limit key for policy %q%s", policy, clientReason(err))})
}

// clientReason is the reason of err's [NoKeyError], after ": ", or ""
// when it has none: no other error's text reaches the client.
func clientReason(err error) string {
	var noKey *NoKeyError
	if errors.As(err, &noKey) && noKey.Reason != "" {
		return ": " + noKey.Reason
	}
	return ""
}

// deny answers a denial: 503 when a Closed fallback refused the request
// (nothing was exceeded: the limiter is degraded), 429 otherwise.
func (c *config) deny(w http.ResponseWriter, o *outcome) {
	d := o.decision
	retry := retryAfterSeconds(d.RetryAfter)
	w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	if d.Source == sluice.SourceFallbackClosed {
		writeProblem(w, http.StatusServiceUnavailable, problem{Type: "about:blank", Title: "Service Unavailable",
			Detail: fmt.Sprintf("the rate limiter is degraded: its store is unavailable, and policy %q refuses requests until it recovers; retry after %d s", o.name, retry)})
		return
	}
	c.writeX(w, o)
	detail := fmt.Sprintf("rate limit %q exceeded; retry after %d s", o.name, retry)
	if d.Degraded() {
		detail = fmt.Sprintf("rate limit %q exceeded, as decided by this server alone while the shared limiter is degraded; retry after %d s", o.name, retry)
	}
	writeProblem(w, http.StatusTooManyRequests, problem{Type: QuotaExceededType, Title: quotaExceededTitle,
		Detail: detail, ViolatedPolicies: []string{o.name}})
}

// unusedLimiter stands in for a policy's limiter where another decides.
type unusedLimiter struct{}

func (unusedLimiter) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return sluice.Decision{}, errors.New("httplimit: this policy's own limiter is not used")
}
