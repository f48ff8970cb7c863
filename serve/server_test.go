package serve_test

import (
	"context"
	"net"
	"os"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/serve"
	"github.com/sluicehq/sluice/store/memstore"
)

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

// startRLS runs srv's rate-limit service on a loopback port and returns a
// client of it (go-control-plane's generated client).
func startRLS(t *testing.T, srv *serve.Server) rlsv3.RateLimitServiceClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// TestTheExamplePolicies: the example file loads, and Envoy's client gets
// the orders policy's 5 a minute, then OVER_LIMIT with the draft-10 fields
// and Retry-After in response_headers_to_add.
func TestTheExamplePolicies(t *testing.T) {
	config, err := os.ReadFile("policies.example.yaml")
	require.NoError(t, err)
	srv, err := serve.New(config, newMemStore(t), nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	client := startRLS(t, srv)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user_id", "u1", "path", "/orders")}}
	var codes []rlsv3.RateLimitResponse_Code
	var last *rlsv3.RateLimitResponse
	for range 6 {
		last, err = client.ShouldRateLimit(context.Background(), req)
		require.NoError(t, err)
		codes = append(codes, last.GetOverallCode())
	}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	require.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok, ok, ok, ok, over}, codes)
	st := last.GetStatuses()[0]
	require.Equal(t, over, st.GetCode())
	require.Equal(t, uint32(5), st.GetCurrentLimit().GetRequestsPerUnit())
	require.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, st.GetCurrentLimit().GetUnit())
	require.Equal(t, uint32(0), st.GetLimitRemaining())
	headers := map[string]string{}
	for _, h := range last.GetResponseHeadersToAdd() {
		headers[h.GetKey()] = h.GetValue()
	}
	require.Equal(t, `"orders";q=5;w=60`, headers["RateLimit-Policy"])
	require.Contains(t, headers["RateLimit"], `"orders";r=0;t=`)
	require.NotEmpty(t, headers["Retry-After"])
}
