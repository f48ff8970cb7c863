package grpclimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/store/memstore"
)

// serve starts a real gRPC server on loopback with the health service
// behind the interceptors, and returns a client for it.
func serve(t *testing.T, policies ...grpclimit.Policy) healthpb.HealthClient {
	unary, err := grpclimit.UnaryServerInterceptor(policies...)
	require.NoError(t, err)
	stream, err := grpclimit.StreamServerInterceptor(policies...)
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.UnaryInterceptor(unary), grpc.StreamInterceptor(stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func TestUnaryAndStream(t *testing.T) {
	mem, err := memstore.New()
	require.NoError(t, err)
	tb, err := tokenbucket.New(mem)
	require.NoError(t, err)
	client := serve(t, grpclimit.Policy{Name: "per-peer", Limiter: tb, Limit: sluice.Limit{Rate: 1, Period: 2 * time.Second, Burst: 2}})

	for range 2 {
		_, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
	}
	_, err = client.Check(t.Context(), &healthpb.HealthCheckRequest{})
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code())
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	require.NotNil(t, retry, "a RetryInfo detail")
	delay := retry.RetryDelay.AsDuration()
	require.Greater(t, delay, time.Second)
	require.LessOrEqual(t, delay, 2*time.Second)

	// Streams are limited when they open: the same peer's bucket is empty.
	watch, err := client.Watch(t.Context(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = watch.Recv()
	require.Equal(t, codes.ResourceExhausted, status.Code(err))

	// A client that waits RetryDelay gets through.
	time.Sleep(delay)
	_, err = client.Check(t.Context(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
}

type broken struct{}

func (broken) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return sluice.Decision{}, context.DeadlineExceeded
}

func TestErrorsAndBadPolicies(t *testing.T) {
	client := serve(t, grpclimit.Policy{Name: "p", Limiter: broken{}, Limit: sluice.PerSecond(1)})
	_, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{})
	require.Equal(t, codes.Unavailable, status.Code(err))

	keyless := serve(t, grpclimit.Policy{Name: "p", Limiter: broken{}, Limit: sluice.PerSecond(1),
		Key: func(context.Context, string) (string, error) { return "", context.Canceled }})
	_, err = keyless.Check(t.Context(), &healthpb.HealthCheckRequest{})
	require.Equal(t, codes.InvalidArgument, status.Code(err))

	for _, p := range []grpclimit.Policy{{}, {Name: "p", Limit: sluice.PerSecond(1)}, {Name: "p", Limiter: broken{}}} {
		_, err := grpclimit.UnaryServerInterceptor(p)
		require.Error(t, err)
	}
	_, err = grpclimit.StreamServerInterceptor()
	require.Error(t, err)
}
