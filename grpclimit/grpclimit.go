// Package grpclimit is gRPC server interceptors over any [sluice.Limiter]:
// a call whose limit is exhausted fails with ResourceExhausted and a
// RetryInfo detail saying when to retry (rounded up to whole
// milliseconds). It is its own module, so that Sluice's core does not
// depend on gRPC.
//
// A limiter error (no decision; compose the fallback decorator to avoid
// them) fails the call with Unavailable. A key function error fails it with
// InvalidArgument.
//
// A policy in shadow mode ([Policy.Shadow]) is decided and counted but
// never fails a call: its would-be denials are logged and recorded as
// shadow decisions.
package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
)

// KeyFunc derives a call's rate-limit key from its context (peer,
// metadata) and full method name.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// Policy is one limit applied to calls.
type Policy struct {
	Name    string // identifies the policy in keys and errors
	Limiter sluice.Limiter
	Limit   sluice.Limit
	Cost    int64   // per call; default 1
	Key     KeyFunc // default PeerAddr
	// Shadow is a dry run: the policy decides every call and its limiter
	// counts it as it would enforced (the key's state moves the same), but
	// a denial lets the call through, with no ResourceExhausted and no
	// RetryInfo. A would-be denial is logged (Info, [ShadowDenialMessage],
	// with the policy, the key, the method, retry_after and source), and
	// every decision is made under ext.WithShadow, so that a sluiceotel
	// layer records it with sluice.shadow=true. A call it cannot key, or a
	// limiter error, is logged (Error) and the call goes on.
	Shadow bool
	// Logger logs the shadow policy's would-be denials and errors
	// (default slog.Default()).
	Logger *slog.Logger
}

// PeerAddr keys a call by its peer's IP address (IPv6 grouped by /64).
func PeerAddr(ctx context.Context, _ string) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "", errors.New("grpclimit: no peer address")
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		host = p.Addr.String()
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("grpclimit: peer address %q: %w", p.Addr, err)
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String(), nil
	}
	prefix, err := a.WithZone("").Prefix(64)
	if err != nil {
		return "", err
	}
	return prefix.String(), nil
}

type limiter struct{ policies []Policy }

func newLimiter(policies []Policy) (*limiter, error) {
	if len(policies) == 0 {
		return nil, errors.New("grpclimit: no policy")
	}
	ps := make([]Policy, len(policies))
	for i, p := range policies {
		if p.Name == "" || p.Limiter == nil || p.Cost < 0 {
			return nil, fmt.Errorf("grpclimit: policy %d needs a name, a limiter and a cost >= 0", i)
		}
		if err := p.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("grpclimit: policy %q: %w", p.Name, err)
		}
		if p.Cost == 0 {
			p.Cost = 1
		}
		if p.Key == nil {
			p.Key = PeerAddr
		}
		if p.Logger == nil {
			p.Logger = slog.Default()
		}
		ps[i] = p
	}
	return &limiter{policies: ps}, nil
}

// check decides the call against every policy, in order.
func (l *limiter) check(ctx context.Context, method string) error {
	for _, p := range l.policies {
		if p.Shadow {
			shadow(ctx, method, p)
			continue
		}
		key, err := p.Key(ctx, method)
		if err != nil {
			return status.Error(codes.InvalidArgument, "no rate-limit key for this call")
		}
		d, err := p.Limiter.AllowN(ctx, sluice.Key(key, "grpc", p.Name), p.Limit, p.Cost)
		if err != nil {
			return status.Error(codes.Unavailable, "the rate limiter is unavailable")
		}
		if !d.Allowed {
			return exhausted(p.Name, d.RetryAfter)
		}
	}
	return nil
}

func exhausted(policy string, retryAfter time.Duration) error {
	retryAfter = retryAfter.Round(time.Millisecond)
	if retryAfter < time.Millisecond {
		retryAfter = time.Millisecond
	}
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("rate limit %q exceeded; retry after %s", policy, retryAfter))
	withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// UnaryServerInterceptor checks every unary call against policies.
func UnaryServerInterceptor(policies ...Policy) (grpc.UnaryServerInterceptor, error) {
	l, err := newLimiter(policies)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := l.check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}, nil
}

// StreamServerInterceptor checks every stream, once when it opens,
// against policies.
func StreamServerInterceptor(policies ...Policy) (grpc.StreamServerInterceptor, error) {
	l, err := newLimiter(policies)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := l.check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}, nil
}
