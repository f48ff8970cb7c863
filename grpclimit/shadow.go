package grpclimit

import (
	"context"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// ShadowDenialMessage is the message of the log line of a shadow policy's
// would-be denial (see [Policy.Shadow]).
const ShadowDenialMessage = "grpclimit: shadow denial"

// shadow decides a call under a shadow policy: counted as if enforced,
// never failed. A would-be denial is logged.
func shadow(ctx context.Context, method string, p Policy) {
	key, err := p.Key(ctx, method)
	if err != nil {
		p.Logger.Error("grpclimit: shadow policy: no key; the call goes on", "policy", p.Name, "method", method, "err", err)
		return
	}
	d, err := p.Limiter.AllowN(ext.WithShadow(ctx), sluice.Key(key, "grpc", p.Name), p.Limit, p.Cost)
	if err != nil {
		p.Logger.Error("grpclimit: shadow policy: no rate-limit decision; the call goes on", "policy", p.Name, "method", method, "err", err)
		return
	}
	if !d.Allowed {
		p.Logger.Info(ShadowDenialMessage, "policy", p.Name, "key", key, "method", method,
			"retry_after", d.RetryAfter, "source", d.Source.String())
	}
}
