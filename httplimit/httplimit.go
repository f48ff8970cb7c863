// Package httplimit is net/http middleware over any [sluice.Limiter]: per
// route policies (algorithm, limit, cost, key), 429 responses with an
// honest Retry-After, the IETF RateLimit and RateLimit-Policy fields
// (draft-ietf-httpapi-ratelimit-headers-10) and the common X-RateLimit-*
// headers, and an application/problem+json body (RFC 9457).
//
// A request is checked against every policy that applies to it, in order;
// the first denial answers 429 (policies checked before it have counted
// the request, unless [WithAtomic] checks them all in one call, all or
// nothing). Every
// response carries the headers of every policy that was checked. Headers
// never carry the key itself.
//
// When a limiter returns an error (Redis down with no fallback policy
// composed), the error handler decides; the default answers 503 and logs
// the error. Compose the fallback decorator to keep serving instead.
package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/multilimit"
)

// Policy is one limit applied to requests.
type Policy struct {
	// Name identifies the policy in the RateLimit headers and in Redis
	// keys; it must be a short token such as "per-ip" or "orders".
	Name string
	// Limiter decides: any algorithm, with any decorators.
	Limiter sluice.Limiter
	// Limit is the policy's limit.
	Limit sluice.Limit
	// Cost is what one request costs (default 1).
	Cost int64
	// Key derives the client's key (default RemoteAddr()).
	Key KeyFunc
	// Algorithm enforces the policy under WithAtomic, where Limiter is
	// not used (default token bucket). Load sets it from the file.
	Algorithm multilimit.Algorithm
}

func (p Policy) validate() error {
	switch {
	case !validName(p.Name):
		return fmt.Errorf("httplimit: policy name %q: use letters, digits, '-', '_' or '.'", p.Name)
	case p.Limiter == nil:
		return fmt.Errorf("httplimit: policy %q has no limiter", p.Name)
	case p.Cost < 0:
		return fmt.Errorf("httplimit: policy %q: cost %d is negative", p.Name, p.Cost)
	}
	if err := p.Limit.Validate(); err != nil {
		return fmt.Errorf("httplimit: policy %q: %w", p.Name, err)
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// ErrorHandler answers a request whose limit could not be decided.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

type config struct {
	ietf, xHeaders bool
	onError        ErrorHandler
	logger         *slog.Logger
	atomic         *multilimit.Limiter
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

// WithAtomic checks all the middleware's policies in one call to multi,
// all or nothing: a request that one policy denies consumes from none. The
// policies are then enforced by their Algorithm on multi's store (their
// Limiter field is not used), must have the same Cost, and their keys must
// share a Redis Cluster slot: give them the same Key function (keys are
// built as sluice.Key(key, "http", policy name), so the key is the hash
// tag).
func WithAtomic(multi *multilimit.Limiter) Option {
	return func(c *config) error {
		if multi == nil {
			return errors.New("httplimit: WithAtomic(nil): omit the option to check policies one by one")
		}
		c.atomic = multi
		return nil
	}
}

// WithLogger sets the logger of the default error handler (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("httplimit: WithLogger(nil): omit the option for slog.Default()")
		}
		c.logger = l
		return nil
	}
}

// Middleware returns middleware that checks every request against
// policies, in order.
func Middleware(policies []Policy, opts ...Option) (func(http.Handler) http.Handler, error) {
	if len(policies) == 0 {
		return nil, errors.New("httplimit: no policy")
	}
	c := config{ietf: true, xHeaders: true, logger: slog.Default()}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("httplimit: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	ps := make([]Policy, len(policies))
	for i, p := range policies {
		if p.Cost == 0 {
			p.Cost = 1
		}
		if p.Key == nil {
			p.Key = RemoteAddr()
		}
		if c.atomic != nil && p.Limiter == nil {
			p.Limiter = unusedLimiter{} // the atomic check decides
		}
		if err := p.validate(); err != nil {
			return nil, err
		}
		if c.atomic != nil {
			if err := p.Algorithm.Validate(p.Limit, p.Cost); err != nil {
				return nil, fmt.Errorf("httplimit: policy %q: %w", p.Name, err)
			}
			if p.Cost != ps[0].Cost && i > 0 {
				return nil, fmt.Errorf("httplimit: WithAtomic: policy %q costs %d, policy %q %d: atomic policies share one cost", p.Name, p.Cost, ps[0].Name, ps[0].Cost)
			}
		}
		ps[i] = p
	}
	if c.onError == nil {
		logger := c.logger
		c.onError = func(w http.ResponseWriter, r *http.Request, err error) {
			logger.Error("httplimit: no rate-limit decision", "method", r.Method, "path", r.URL.Path, "err", err)
			problem(w, http.StatusServiceUnavailable, "Service Unavailable", "the rate limiter is unavailable")
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serve(w, r, next, ps, &c)
		})
	}, nil
}

func serve(w http.ResponseWriter, r *http.Request, next http.Handler, ps []Policy, c *config) {
	if c.atomic != nil {
		serveAtomic(w, r, next, ps, c)
		return
	}
	var tightest *outcome
	for _, p := range ps {
		key, err := p.Key(r)
		if err != nil {
			problem(w, http.StatusBadRequest, "Bad Request", "the request carries no rate-limit key")
			return
		}
		d, err := p.Limiter.AllowN(r.Context(), sluice.Key(key, "http", p.Name), p.Limit, p.Cost)
		if err != nil {
			c.onError(w, r, err)
			return
		}
		o := &outcome{policy: p, decision: d}
		c.writeHeaders(w, o)
		if tightest == nil || d.Remaining < tightest.decision.Remaining {
			tightest = o
		}
		if !d.Allowed {
			c.writeX(w, o)
			retry := retryAfterSeconds(d.RetryAfter)
			w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
			problem(w, http.StatusTooManyRequests, "Too Many Requests",
				fmt.Sprintf("rate limit %q exceeded; retry after %d s", p.Name, retry))
			return
		}
	}
	c.writeX(w, tightest)
	next.ServeHTTP(w, r)
}

// serveAtomic checks every policy in one multilimit call.
func serveAtomic(w http.ResponseWriter, r *http.Request, next http.Handler, ps []Policy, c *config) {
	checks := make([]multilimit.Check, len(ps))
	for i, p := range ps {
		key, err := p.Key(r)
		if err != nil {
			problem(w, http.StatusBadRequest, "Bad Request", "the request carries no rate-limit key")
			return
		}
		checks[i] = multilimit.Check{Key: sluice.Key(key, "http", p.Name), Limit: p.Limit, Algorithm: p.Algorithm}
	}
	d, err := c.atomic.AllowN(r.Context(), checks, ps[0].Cost)
	if err != nil {
		c.onError(w, r, err)
		return
	}
	var tightest *outcome
	for i, p := range ps {
		o := &outcome{policy: p, decision: d.Limits[i]}
		c.writeHeaders(w, o)
		if tightest == nil || o.decision.Remaining < tightest.decision.Remaining {
			tightest = o
		}
	}
	if !d.Allowed {
		denied := &outcome{policy: ps[d.Denied], decision: d.Limits[d.Denied]}
		c.writeX(w, denied)
		retry := retryAfterSeconds(d.RetryAfter)
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
		problem(w, http.StatusTooManyRequests, "Too Many Requests",
			fmt.Sprintf("rate limit %q exceeded; retry after %d s", ps[d.Denied].Name, retry))
		return
	}
	c.writeX(w, tightest)
	next.ServeHTTP(w, r)
}

// unusedLimiter stands in for a policy's Limiter under WithAtomic.
type unusedLimiter struct{}

func (unusedLimiter) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return sluice.Decision{}, errors.New("httplimit: an atomic policy's own limiter is not used")
}

type outcome struct {
	policy   Policy
	decision sluice.Decision
}

// writeHeaders adds the policy's RateLimit-Policy and RateLimit members.
func (c *config) writeHeaders(w http.ResponseWriter, o *outcome) {
	if !c.ietf {
		return
	}
	h := w.Header()
	policy := fmt.Sprintf("%q;q=%d", o.policy.Name, o.policy.Limit.Rate)
	if p := o.policy.Limit.Period; p%time.Second == 0 {
		policy += ";w=" + strconv.FormatInt(int64(p/time.Second), 10)
	}
	h.Add("RateLimit-Policy", policy)
	h.Add("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", o.policy.Name, o.decision.Remaining, ceilSeconds(o.decision.ResetAfter)))
}

// writeX sets the X-RateLimit-* headers from one policy's outcome.
func (c *config) writeX(w http.ResponseWriter, o *outcome) {
	if !c.xHeaders || o == nil {
		return
	}
	h := w.Header()
	// With stacked middlewares, keep the tightest policy's figures.
	if prev, err := strconv.ParseInt(h.Get("X-RateLimit-Remaining"), 10, 64); err == nil && prev < o.decision.Remaining {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(o.policy.Limit.Rate, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(o.decision.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(o.decision.ResetAfter), 10))
}

// retryAfterSeconds is RetryAfter in whole seconds, rounded up, never 0.
func retryAfterSeconds(d time.Duration) int64 { return max(1, ceilSeconds(d)) }

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// problem writes an RFC 9457 problem+json response.
func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "about:blank", "title": title, "status": status, "detail": detail,
	})
}
