package harness

// This file holds the serve scenarios: sluice serve (package serve) as
// Envoy calls it, over gRPC on loopback, next to a direct library call of
// the same algorithm on the same Redis and the same client, and next to
// envoyproxy/ratelimit itself and sluice-serve in its
// envoyproxy/ratelimit-compatible mode, two processes started on the same
// redis-server with the same YAML and environment (envoyproxy.go).

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
	// ServeEnvoyProxy is envoyproxy/ratelimit's own service (its
	// service_cmd at envoyrl.Version) and ServeEnvoyCompat sluice-serve
	// started as its drop-in: two processes with the same file and
	// environment, on the scenario's redis-server.
	ServeEnvoyProxy  = "envoyproxy/ratelimit (its service process, fixed window): gRPC on loopback"
	ServeEnvoyCompat = "sluice-serve, envoyproxy/ratelimit-compatible mode (same YAML, same env): gRPC on loopback"
)

// ServeScenarios returns the serve scenarios: one caller (the added
// latency of a decision through the server) and 32 callers (decisions per
// second). Each subject runs for a fifth of the duration, so that both
// scenarios together take about 3 × the duration with the 7 subjects
// (and the two process subjects' start, outside the measured time).
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

// ServeSubjects returns the serve scenarios' subjects. The in-process ones
// go through the benchmark's go-redis client (as sluice serve --redis
// does), so that they differ only in what they run over it; the two
// process subjects (envoyproxy/ratelimit and sluice-serve's compatible
// mode) each open their own connections (REDIS_POOL_SIZE, 10 by default)
// to the same redis-server, and run only on a real one.
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
		processSubject(ServeEnvoyProxy, envoyProxyService),
		processSubject(ServeEnvoyCompat, sluiceServeService),
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
	decide, closeConn, err := dialRLS(l.Addr().String())
	if err != nil {
		gs.Stop()
		return nil, nil, err
	}
	return decide, func() {
		closeConn()
		gs.Stop()
	}, nil
}

// dialRLS returns a Decide through one client connection to the
// rate-limit service at addr (go-control-plane's generated client), which
// every caller shares, and the function that closes it.
func dialRLS(addr string) (Decide, func(), error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	client := rlsv3.NewRateLimitServiceClient(conn)
	return decideRLS(func(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		return client.ShouldRateLimit(ctx, req)
	}), func() { _ = conn.Close() }, nil
}
