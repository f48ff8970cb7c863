package serve

import (
	"context"
	"errors"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// ShadowDenialMessage is the message of the log line of a shadow policy's
// would-be denial (see [Config]).
const ShadowDenialMessage = "serve: shadow denial"

// shadow decides one descriptor under a shadow rule for ShouldRateLimit:
// counted as if enforced, logged when it would deny, never denied. A store
// error is logged and the descriptor allowed; only the call's own end
// (its context canceled or past its deadline) is returned.
func (s *Server) shadow(ctx context.Context, r *rule, t target, cost int64, descriptor, via string) error {
	d, err := r.limiter.AllowN(ext.WithShadow(ctx), t.key, t.limit, cost)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		s.logger.Error("serve: shadow policy: no decision; the descriptor is allowed", "policy", r.name, "descriptor", descriptor, "err", err)
		return nil
	}
	s.logShadow(r, t, d, descriptor, via)
	return nil
}

func (s *Server) logShadow(r *rule, t target, d sluice.Decision, descriptor, via string) {
	if d.Allowed {
		return
	}
	args := []any{"policy", r.name, "descriptor", descriptor, "via", via, "retry_after", d.RetryAfter, "source", d.Source.String()}
	if t.tier != "" {
		args = append(args, "tier", t.tier)
	}
	s.logger.Info(ShadowDenialMessage, args...)
}

// shadowAnswer is POST /v1/allow's answer to a decision of a shadow rule:
// allowed, with ShadowDenied set when the rule would have denied.
func (s *Server) shadowAnswer(r *rule, t target, req AllowRequest, d sluice.Decision) AllowResponse {
	descriptor := describeEntries(requestEntries(r, req))
	s.logShadow(r, t, d, descriptor, "http")
	return AllowResponse{Allowed: true, Remaining: d.Remaining, ResetAfterMs: d.ResetAfter.Milliseconds(),
		Source: d.Source.String(), ShadowDenied: !d.Allowed}
}

// requestEntries are the descriptor entries a /v1/allow request names (it
// has been checked against r by targetOfRequest).
func requestEntries(r *rule, req AllowRequest) []entry {
	if req.Key != "" {
		return []entry{{key: r.match[0].Key, value: req.Key}}
	}
	entries := make([]entry, len(req.Descriptor))
	for i, e := range req.Descriptor {
		entries[i] = entry{key: e.Key, value: e.Value}
	}
	return entries
}

// describeEntries writes a descriptor for a log line, key=value entries
// with each value bounded as in the store's keys (over 64 bytes: its
// SHA-256).
func describeEntries(entries []entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = e.key + "=" + boundValue(e.value)
	}
	return strings.Join(parts, ", ")
}
