package httplimit

import (
	"net/http"

	"github.com/sluicehq/sluice/ext"
)

// ShadowDenialMessage is the message of the log line of a shadow policy's
// would-be denial (see [Policy.Shadow]).
const ShadowDenialMessage = "httplimit: shadow denial"

// shadow decides r under a shadow policy: counted as if enforced, never
// answered, never written in a header. A would-be denial is logged.
func (c *config) shadow(r *http.Request, p *policy) {
	t, err := p.target(r)
	if err != nil {
		c.logger.Error("httplimit: shadow policy: no key; the request goes on", "policy", p.Name,
			"method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	d, err := p.Limiter.AllowN(ext.WithShadow(r.Context()), t.storeKey, t.limit, t.cost)
	if err != nil {
		c.logger.Error("httplimit: shadow policy: no rate-limit decision; the request goes on", "policy", p.Name,
			"method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	if !d.Allowed {
		args := []any{"policy", p.Name, "key", t.clientKey, "method", r.Method, "path", r.URL.Path,
			"retry_after", d.RetryAfter, "source", d.Source.String()}
		if t.tier != "" {
			args = append(args, "tier", t.tier)
		}
		c.logger.Info(ShadowDenialMessage, args...)
	}
}
