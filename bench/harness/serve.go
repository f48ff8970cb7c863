package harness

// This file holds the serve scenarios: sluice serve (package serve) as
// Envoy calls it, over gRPC on loopback, next to a direct library call of
// the same algorithm on the same Redis and the same client, and next to an
// envoyproxy/ratelimit-style fixed window (its INCRBY+EXPIRE pipeline),
// reimplemented here as a bench subject, called directly and behind the
// same gRPC server shape.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/serve"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// serveLimit admits everything the serve scenarios send (they measure
// speed), with a burst equal to the rate so that every subject, the fixed
// windows included, runs the same limit: 1,000,000 per one-second window.
var serveLimit = sluice.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}

// serveDomain is the rate-limit domain of the serve subjects' requests.
const serveDomain = "bench"

// serveKeys is how many keys (user_id values) the serve scenarios cycle
// over.
const serveKeys = 1_000

// The serve subjects' names. The direct calls are what the servers'
// overhead is measured over.
const (
	ServeDirectTokenBucket = "sluice/tokenbucket: direct library call"
	ServeInProcess         = "sluice serve (tokenbucket): ShouldRateLimit in process, no gRPC"
	ServeGRPCTokenBucket   = "sluice serve (tokenbucket): gRPC on loopback"
	ServeDirectFixedWindow = "sluice/fixedwindow: direct library call"
	ServeGRPCFixedWindow   = "sluice serve (fixedwindow): gRPC on loopback"
	EnvoyStyleDirect       = "envoyproxy/ratelimit-style fixed window, reimplemented (INCRBY+EXPIRE pipeline): direct call"
	EnvoyStyleGRPC         = "envoyproxy/ratelimit-style fixed window, reimplemented (INCRBY+EXPIRE pipeline): gRPC on loopback"
)

// ServeScenarios returns the serve scenarios: one caller (the added
// latency of a decision through the server) and 32 callers (decisions per
// second). Each subject runs for a fifth of the duration, so that both
// scenarios together take about 3 × the duration with the 7 subjects.
func ServeScenarios() []Scenario {
	return []Scenario{
		{Name: "serve: one caller, 1,000 keys, all allowed (sluice serve against a direct call)",
			Limit: serveLimit, Pods: 1, Throughput: true, Subjects: ServeSubjects(),
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				hammer(ctx, pods[0], rec, d/5, 1, serveKeys)
			}},
		{Name: "serve: 32 callers, 1,000 keys, all allowed (sluice serve against a direct call)",
			Limit: serveLimit, Pods: 1, Throughput: true, Subjects: ServeSubjects(),
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				hammer(ctx, pods[0], rec, d/5, 32, serveKeys)
			}},
	}
}

// ServeSubjects returns the serve scenarios' subjects. Every one goes
// through the go-redis client (as sluice serve --redis does), so that
// they differ only in what they run over it.
func ServeSubjects() []Subject {
	return []Subject{
		{Name: ServeDirectTokenBucket, Remote: true, Ping: pingGoRedis, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			store, err := goredisstore.New(c.GoRedis)
			if err != nil {
				return nil, nil, fmt.Errorf("go-redis store: %w", err)
			}
			l, err := tokenbucket.New(store)
			if err != nil {
				return nil, nil, err
			}
			return decideWith(l, limit), func() {}, nil
		}},
		{Name: ServeInProcess, Remote: true, Ping: pingGoRedis, Over: ServeDirectTokenBucket, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			srv, closeSrv, err := newServeServer(c, "tokenbucket", limit)
			if err != nil {
				return nil, nil, err
			}
			return decideRLS(func(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
				return srv.ShouldRateLimit(ctx, req)
			}), closeSrv, nil
		}},
		{Name: ServeGRPCTokenBucket, Remote: true, Ping: pingGoRedis, Over: ServeDirectTokenBucket, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			return serveOverGRPC(c, "tokenbucket", limit)
		}},
		{Name: ServeDirectFixedWindow, Remote: true, Ping: pingGoRedis, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			store, err := goredisstore.New(c.GoRedis)
			if err != nil {
				return nil, nil, fmt.Errorf("go-redis store: %w", err)
			}
			l, err := fixedwindow.New(store)
			if err != nil {
				return nil, nil, err
			}
			return decideWith(l, limit), func() {}, nil
		}},
		{Name: ServeGRPCFixedWindow, Remote: true, Ping: pingGoRedis, Over: ServeDirectFixedWindow, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			return serveOverGRPC(c, "fixedwindow", limit)
		}},
		{Name: EnvoyStyleDirect, Remote: true, Ping: pingGoRedis, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			e, err := newEnvoyStyle(c.GoRedis, limit)
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context, key string) (bool, error) {
				counts, _, err := e.hit(ctx, serveDomain, []*ratelimitv3.RateLimitDescriptor{userDescriptor(key)}, 1)
				if err != nil {
					return false, err
				}
				return counts[0] <= e.limit, nil
			}, func() {}, nil
		}},
		{Name: EnvoyStyleGRPC, Remote: true, Ping: pingGoRedis, Over: EnvoyStyleDirect, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			e, err := newEnvoyStyle(c.GoRedis, limit)
			if err != nil {
				return nil, nil, err
			}
			return overGRPC(&envoyStyleServer{e: e})
		}},
	}
}

func userDescriptor(key string) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user_id", Value: key}}}
}

// decideRLS asks a rate-limit service about one descriptor, user_id=key,
// as Envoy would for a route with a request_headers action.
func decideRLS(should func(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)) Decide {
	return func(ctx context.Context, key string) (bool, error) {
		resp, err := should(ctx, &rlsv3.RateLimitRequest{Domain: serveDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{userDescriptor(key)}})
		if err != nil {
			return false, err
		}
		return resp.GetOverallCode() == rlsv3.RateLimitResponse_OK, nil
	}
}

// newServeServer builds a sluice serve Server on the go-redis client, with
// one policy on user_id, recording its metrics as the command does (an
// OpenTelemetry SDK meter provider; here with a reader nobody scrapes).
func newServeServer(c Clients, algorithm string, limit sluice.Limit) (*serve.Server, func(), error) {
	config := fmt.Sprintf("domain: %s\npolicies:\n  - name: per-user\n    match:\n      - key: user_id\n    algorithm: %s\n    rate: %d\n    period: %s\n",
		serveDomain, algorithm, limit.Rate, limit.Period)
	if limit.Burst != limit.Rate {
		config += fmt.Sprintf("    burst: %d\n", limit.Burst)
	}
	store, err := goredisstore.New(c.GoRedis)
	if err != nil {
		return nil, nil, fmt.Errorf("go-redis store: %w", err)
	}
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	srv, err := serve.New([]byte(config), store, meters, slog.New(slog.DiscardHandler))
	if err != nil {
		_ = meters.Shutdown(context.Background())
		return nil, nil, err
	}
	return srv, func() {
		_ = srv.Close()
		_ = meters.Shutdown(context.Background())
	}, nil
}

// serveOverGRPC runs a sluice serve Server behind a gRPC server on a
// loopback port and decides through go-control-plane's generated client.
func serveOverGRPC(c Clients, algorithm string, limit sluice.Limit) (Decide, func(), error) {
	srv, closeSrv, err := newServeServer(c, algorithm, limit)
	if err != nil {
		return nil, nil, err
	}
	decide, stop, err := overGRPC(srv)
	if err != nil {
		closeSrv()
		return nil, nil, err
	}
	return decide, func() { stop(); closeSrv() }, nil
}

// overGRPC serves impl with grpc.NewServer on 127.0.0.1:0 (as
// sluice-serve does, default options) and returns a Decide through one
// client connection, which every caller shares.
func overGRPC(impl rlsv3.RateLimitServiceServer) (Decide, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, impl)
	go func() { _ = gs.Serve(l) }()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		gs.Stop()
		return nil, nil, err
	}
	client := rlsv3.NewRateLimitServiceClient(conn)
	return decideRLS(func(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			return client.ShouldRateLimit(ctx, req)
		}), func() {
			_ = conn.Close()
			gs.Stop()
		}, nil
}

// envoyStyle is a fixed window counted the way envoyproxy/ratelimit's Redis
// backend counts one (its default, Lua-free path): per descriptor a key
// named by the domain, the entries and the window's start, and one
// pipeline of INCRBY key hits and EXPIRE key window for all of a request's
// descriptors; a descriptor is over the limit when the count after the
// increment exceeds it. It is a reimplementation for this benchmark, not
// envoyproxy/ratelimit: it has none of that service's local cache of keys
// over the limit, near-limit statistics, expiry jitter or configuration.
type envoyStyle struct {
	client *redis.Client
	limit  int64 // per window
	window int64 // seconds
	unit   rlsv3.RateLimitResponse_RateLimit_Unit
}

// newEnvoyStyle counts limit.Rate per limit.Period, which must be one of
// Envoy's units (a second, a minute, an hour or a day), with Burst = Rate.
func newEnvoyStyle(client *redis.Client, limit sluice.Limit) (*envoyStyle, error) {
	units := map[time.Duration]rlsv3.RateLimitResponse_RateLimit_Unit{
		time.Second: rlsv3.RateLimitResponse_RateLimit_SECOND, time.Minute: rlsv3.RateLimitResponse_RateLimit_MINUTE,
		time.Hour: rlsv3.RateLimitResponse_RateLimit_HOUR, 24 * time.Hour: rlsv3.RateLimitResponse_RateLimit_DAY,
	}
	unit, ok := units[limit.Period]
	if !ok || limit.Burst != limit.Rate || limit.Rate > math.MaxUint32 {
		return nil, errors.New("envoyproxy/ratelimit-style fixed window: the limit must be per second, minute, hour or day, with burst = rate")
	}
	return &envoyStyle{client: client, limit: limit.Rate, window: int64(limit.Period / time.Second), unit: unit}, nil
}

// hit counts hits against every descriptor in one pipeline and returns the
// counts after the increments and the time left in the window.
func (e *envoyStyle) hit(ctx context.Context, domain string, ds []*ratelimitv3.RateLimitDescriptor, hits uint64) ([]int64, time.Duration, error) {
	now := time.Now().Unix()
	start := now / e.window * e.window
	pipe := e.client.Pipeline()
	incrs := make([]*redis.IntCmd, len(ds))
	for i, d := range ds {
		key := "envoystyle:" + domain
		for _, entry := range d.GetEntries() {
			key += "_" + entry.GetKey() + "_" + entry.GetValue()
		}
		key += "_" + strconv.FormatInt(start, 10)
		incrs[i] = pipe.IncrBy(ctx, key, int64(hits))
		pipe.Expire(ctx, key, time.Duration(e.window)*time.Second)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, err
	}
	counts := make([]int64, len(ds))
	for i, c := range incrs {
		counts[i] = c.Val()
	}
	return counts, time.Duration(start+e.window-now) * time.Second, nil
}

// envoyStyleServer is envoyStyle behind the same RateLimitService shape as
// sluice serve: every descriptor of the domain is limited by the one
// limit, and the statuses carry current_limit, limit_remaining and
// duration_until_reset.
type envoyStyleServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	e *envoyStyle
}

func (s *envoyStyleServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() != serveDomain {
		return nil, status.Errorf(codes.InvalidArgument, "domain %q", req.GetDomain())
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no descriptors")
	}
	counts, reset, err := s.e.hit(ctx, req.GetDomain(), req.GetDescriptors(), uint64(max(req.GetHitsAddend(), 1)))
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	for _, n := range counts {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK,
			CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: uint32(s.e.limit), Unit: s.e.unit},
			LimitRemaining:     uint32(max(s.e.limit-n, 0)),
			DurationUntilReset: durationpb.New(reset)}
		if n > s.e.limit {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	return resp, nil
}
