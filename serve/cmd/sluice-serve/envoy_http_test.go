package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// answering answers every request with code, or err.
type answering struct {
	code rlsv3.RateLimitResponse_Code
	err  error
	got  *rlsv3.RateLimitRequest
}

func (a *answering) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	a.got = req
	if a.err != nil {
		return nil, a.err
	}
	return &rlsv3.RateLimitResponse{OverallCode: a.code, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: a.code, LimitRemaining: 7}}}, nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestJSONAnswersAsEnvoyRatelimit(t *testing.T) {
	const body = `{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}], "hitsAddend": 2}`
	cases := []struct {
		name       string
		svc        *answering
		method     string
		body       string
		wantStatus int
		wantType   string
		wantBody   string // a 400's body; else a substring, spaces removed
	}{
		{"OK", &answering{code: rlsv3.RateLimitResponse_OK}, "POST", body, 200, "application/json", `"OK"`},
		{"OVER_LIMIT", &answering{code: rlsv3.RateLimitResponse_OVER_LIMIT}, "POST", body, 429, "application/json", `"OVER_LIMIT"`},
		{"UNKNOWN", &answering{code: rlsv3.RateLimitResponse_UNKNOWN}, "POST", body, 500, "application/json", `"statuses"`},
		{"any method", &answering{code: rlsv3.RateLimitResponse_OK}, "GET", body, 200, "application/json", `"limitRemaining":7`},
		{"not JSON", &answering{}, "POST", `domain=d`, 400, "text/plain; charset=utf-8", "Bad Request\n"},
		{"an unknown field", &answering{}, "POST", `{"domain": "d", "hits": 1}`, 400, "text/plain; charset=utf-8", "Bad Request\n"},
		{"no body", &answering{}, "POST", ``, 400, "text/plain; charset=utf-8", "Bad Request\n"},
		{"refused by the service", &answering{err: errors.New("rate limit domain must not be empty")}, "POST", `{}`, 400, "text/plain; charset=utf-8", "Bad Request\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			mainMux(newEnvoyHealth(false), c.svc, quiet).ServeHTTP(rec, httptest.NewRequest(c.method, "/json", strings.NewReader(c.body)))
			require.Equal(t, c.wantStatus, rec.Code, rec.Body.String())
			require.Equal(t, c.wantType, rec.Header().Get("Content-Type"))
			if c.wantStatus == 400 {
				require.Equal(t, c.wantBody, rec.Body.String())
			} else {
				// protojson varies its spacing on purpose.
				require.Contains(t, strings.ReplaceAll(rec.Body.String(), " ", ""), c.wantBody)
				var resp rlsv3.RateLimitResponse
				require.NoError(t, protojson.Unmarshal(rec.Body.Bytes(), &resp), "the body is a RateLimitResponse")
				require.Equal(t, "d", c.svc.got.GetDomain())
				require.Equal(t, uint32(2), c.svc.got.GetHitsAddend())
				require.Equal(t, "v", c.svc.got.GetDescriptors()[0].GetEntries()[0].GetValue())
			}
		})
	}
}

func TestHealthcheckFailsFromTheDrainOn(t *testing.T) {
	h := newEnvoyHealth(false)
	mux := mainMux(h, &answering{}, quiet)
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthcheck", nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get()
	require.Equal(t, 200, code)
	require.Equal(t, "OK", body)

	// gRPC health over a real connection.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, h.grpc)
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	status := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		require.NoError(t, err)
		return resp.GetStatus()
	}
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, status("ratelimit"))
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, status(""))

	h.fail()
	code, body = get()
	require.Equal(t, 500, code)
	require.Empty(t, body)
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, status("ratelimit"))
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, status(""), `"" stays SERVING, as in envoyproxy/ratelimit`)
}

func TestHealthWithAtLeastOneConfigLoaded(t *testing.T) {
	h := newEnvoyHealth(true)
	require.False(t, h.ok.Load(), "healthy before a configuration")
	h.configLoaded(true)
	require.True(t, h.ok.Load(), "unhealthy with a domain loaded")
	h.configLoaded(false)
	require.False(t, h.ok.Load(), "healthy with a configuration of no domain")
	h.configLoaded(true)
	h.fail()
	h.configLoaded(true)
	require.False(t, h.ok.Load(), "healthy again after SIGTERM")
}

func TestDebugListenerServesProfilesAndStats(t *testing.T) {
	mux := debugMux(func() string {
		return "edge.user: unit=HOUR requests_per_unit=2, shadow_mode: false, quota_mode: false\n"
	})
	for _, c := range []struct{ path, want string }{
		{"/rlconfig", "edge.user: unit=HOUR requests_per_unit=2, shadow_mode: false, quota_mode: false\n"},
		{"/", "/rlconfig: print out the currently loaded configuration for debugging"},
		{"/", "/debug/pprof/: root of various pprof endpoints"},
		{"/anything", "/stats: print out stats"},
		{"/stats", "memstats: {"},
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile:"},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
		require.Equal(t, http.StatusOK, rec.Code, c.path)
		require.Contains(t, rec.Body.String(), c.want, c.path)
	}
}

func TestOtherPathsOfTheMainListenerAre404(t *testing.T) {
	rec := httptest.NewRecorder()
	mainMux(newEnvoyHealth(false), &answering{}, quiet).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/allow", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
}
