// Package envoyratelimit is a drop-in for envoyproxy/ratelimit's
// decision service: its configuration, matching, answers and metrics, with
// each limit decided by a sluice limiter.
package envoyratelimit

import (
	"context"
	"errors"
	"log/slog"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
	"github.com/sluicehq/sluice/stack"
)

// Options configures [New].
type Options struct {
	MergeDomainConfig bool
	ShadowMode        bool
	NearLimitRatio    float64 // 0: 0.8
	CacheKeyPrefix    string
	ResponseHeaders   bool
	LimitHeader       string // empty: RateLimit-Limit
	RemainingHeader   string // empty: RateLimit-Remaining
	ResetHeader       string // empty: RateLimit-Reset
	Registerer        prometheus.Registerer
	Logger            *slog.Logger
	// Overlay chooses a rule's stack by rule name or full stat key.
	Overlay map[string]stack.Spec
}

// Service answers envoyproxy/ratelimit's gRPC API.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

// New loads files and serves them on store.
func New(files []config.File, store sluice.Store, opts Options) (*Service, error) {
	return nil, errors.New("envoyratelimit: not implemented")
}

// Reload replaces the configuration, all or nothing.
func (s *Service) Reload(files []config.File) error {
	return errors.New("envoyratelimit: not implemented")
}

// ShouldRateLimit decides a request.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return nil, errors.New("envoyratelimit: not implemented")
}

// Close waits for calls in flight and closes the limiters.
func (s *Service) Close() error { return nil }

// Loaded reports whether a configuration is in force.
func (s *Service) Loaded() bool { return false }
