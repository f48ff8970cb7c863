package httplimit

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// QuotaExceededType is the problem type of a 429 (RFC 9457), as
// draft-ietf-httpapi-ratelimit-headers-10 registers it; its
// "violated-policies" member names the policies that denied.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

const quotaExceededTitle = "Request cannot be satisfied as assigned quota has been exceeded"

// outcome is one policy's decision on a request.
type outcome struct {
	name     string
	quota    quota
	decision sluice.Decision
}

// writePolicy adds the policy's RateLimit-Policy item: "name";q=Q;w=W.
func (c *config) writePolicy(w http.ResponseWriter, name string, q quota) {
	if !c.ietf {
		return
	}
	w.Header().Add("RateLimit-Policy", policyItem(name, q))
}

func policyItem(name string, q quota) string { return fmt.Sprintf("%q;q=%d;w=%d", name, q.q, q.w) }

func rateLimitItem(name string, q quota, d sluice.Decision) string {
	r := min(d.Remaining, q.q)
	item := fmt.Sprintf("%q;r=%d", name, r)
	if t, ok := untilMoreQuota(d, q, r); ok {
		item += ";t=" + strconv.FormatInt(t, 10)
	}
	return item
}

// writeRateLimit adds the policy's RateLimit item: "name";r=R;t=T, r what
// remains (never above q), t the seconds until more quota is available
// (omitted when none can be: the quota is full). A decision made by a
// fallback policy has no figures of the shared limit: no item.
func (c *config) writeRateLimit(w http.ResponseWriter, o *outcome) {
	if !c.ietf || o.decision.Degraded() {
		return
	}
	w.Header().Add("RateLimit", rateLimitItem(o.name, o.quota, o.decision))
}

// untilMoreQuota returns the seconds, rounded up, until more quota than r
// is available (draft-10's t), and false where that is not known. For a
// denial it is when the request would be allowed (its RetryAfter). For a
// bucket, whose tokens come back one every interval and all of them by
// ResetAfter, the next is due ResetAfter less the whole intervals before
// it: read from ResetAfter alone, so that it stays true when Remaining is
// an estimate (under a lease, Remaining counts the tokens the process
// holds). A full quota gets no more, and a window algorithm's allowed
// decision does not tell when quota comes back (ResetAfter is when all of
// it has): no t. t is 0 only when r > 0, quota being left now.
func untilMoreQuota(d sluice.Decision, q quota, r int64) (int64, bool) {
	switch {
	case !d.Allowed:
		return retryAfterSeconds(d.RetryAfter), true
	case r >= q.q || !q.refills:
		return 0, false
	}
	var next time.Duration
	if d.ResetAfter > 0 && q.interval > 0 {
		next = d.ResetAfter - (d.ResetAfter-1)/q.interval*q.interval // in (0, interval]
	}
	t := ceilSeconds(next)
	if r == 0 {
		t = max(t, 1)
	}
	return t, true
}

// writeX sets the X-RateLimit-* headers from one policy's outcome (none
// for a decision made by a fallback policy).
func (c *config) writeX(w http.ResponseWriter, o *outcome) {
	if !c.xHeaders || o == nil || o.decision.Degraded() {
		return
	}
	h := w.Header()
	remaining := min(o.decision.Remaining, o.quota.q)
	// With stacked middlewares, keep the tightest policy's figures.
	if prev, err := strconv.ParseInt(h.Get("X-RateLimit-Remaining"), 10, 64); err == nil && prev < remaining {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(o.quota.q, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(o.decision.ResetAfter), 10))
}

// retryAfterSeconds is RetryAfter in whole seconds, rounded up, never 0.
func retryAfterSeconds(d time.Duration) int64 { return max(1, ceilSeconds(d)) }

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return ceilSecondsF(d.Seconds())
}

func ceilSecondsF(s float64) int64 { return int64(math.Ceil(s)) }

// problem is an RFC 9457 problem detail.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// writeProblem writes p as an application/problem+json response.
func writeProblem(w http.ResponseWriter, status int, p problem) {
	p.Status = status
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// Fields returns the draft-10 RateLimit-Policy and RateLimit items that
// the middleware sends for one decision of a policy named name, for
// servers that speak HTTP through another protocol (sluice serve puts them
// in Envoy's response_headers_to_add). rateLimit is "" for a decision made
// by a fallback policy, whose figures of the shared limit are unknown.
func Fields(name string, limiter sluice.Limiter, limit sluice.Limit, d sluice.Decision) (policy, rateLimit string) {
	q, _ := quotaOf(limiter, limit)
	if d.Degraded() {
		return policyItem(name, q), ""
	}
	return policyItem(name, q), rateLimitItem(name, q, d)
}
