package httplimit

import (
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// ShadowDenialMessage is the message of the log line of a shadow policy's
// would-be denial (see [Policy.Shadow]).
const ShadowDenialMessage = "httplimit: shadow denial"

// shadow decides r under a shadow policy: counted as if enforced, never
// answered, never written in a header. A would-be denial is logged.
func (c *config) shadow(r *http.Request, p *policy) {
	key, err := p.Key(r)
	if err != nil {
		c.logger.Error("httplimit: shadow policy: no key; the request goes on", "policy", p.Name,
			"method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	d, err := p.Limiter.AllowN(ext.WithShadow(r.Context()), sluice.Key(key, "http", p.Name), p.Limit, p.Cost)
	if err != nil {
		c.logger.Error("httplimit: shadow policy: no rate-limit decision; the request goes on", "policy", p.Name,
			"method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	if !d.Allowed {
		c.logger.Info(ShadowDenialMessage, "policy", p.Name, "key", key, "method", r.Method, "path", r.URL.Path,
			"retry_after", d.RetryAfter, "source", d.Source.String())
	}
}
