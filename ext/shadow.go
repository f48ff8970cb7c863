package ext

import "context"

// shadowKey marks a context whose decision is made in shadow mode.
type shadowKey struct{}

// WithShadow returns ctx marked as a shadow decision: the caller (an
// httplimit, grpclimit or sluice serve policy with Shadow set) makes the
// decision and counts it, but never denies on it. A limiter decides the
// same under the mark; decorators that record decisions (sluiceotel) use
// it to tell shadow decisions apart.
func WithShadow(ctx context.Context) context.Context {
	return context.WithValue(ctx, shadowKey{}, true)
}

// IsShadow reports whether ctx was marked by [WithShadow].
func IsShadow(ctx context.Context) bool {
	v, _ := ctx.Value(shadowKey{}).(bool)
	return v
}
