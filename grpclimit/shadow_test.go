package grpclimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// lockedBuffer is a log destination the server's goroutines write to and
// the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines decodes the JSON log lines whose msg is msg.
func (b *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if line == "" {
			continue
		}
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// marks records, per decision, whether its context was a shadow one (what
// sluiceotel reads to set sluice.shadow=true).
type marks struct {
	next sluice.Limiter
	mu   sync.Mutex
	seen []bool
}

func (m *marks) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	m.mu.Lock()
	m.seen = append(m.seen, ext.IsShadow(ctx))
	m.mu.Unlock()
	return m.next.AllowN(ctx, key, limit, n)
}

func (m *marks) shadows() []bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]bool(nil), m.seen...)
}

// TestShadowPolicyAtItsLimitLetsCallsThrough: a shadow policy of a burst
// of 2 lets a third call and a stream through with no ResourceExhausted and
// no limiting metadata, logs each would-be denial with the policy and the
// key, decides under ext.WithShadow, and counts every call in the store as
// the enforced policy does: the same policy, enforced, on the same store,
// fails the next call. Shadow false fails the third, as before.
func TestShadowPolicyAtItsLimitLetsCallsThrough(t *testing.T) {
	for _, shadow := range []bool{true, false} {
		t.Run(map[bool]string{true: "shadow", false: "enforced"}[shadow], func(t *testing.T) {
			store, err := memstore.New(memstore.WithClock(sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))))
			require.NoError(t, err)
			tb, err := tokenbucket.New(store)
			require.NoError(t, err)
			probe := &marks{next: tb}
			logs := &lockedBuffer{}
			limit := sluice.Limit{Rate: 1, Period: time.Minute, Burst: 2}
			client := serve(t, grpclimit.Policy{Name: "per-peer", Limiter: probe, Limit: limit, Shadow: shadow,
				Logger: slog.New(slog.NewJSONHandler(logs, nil))})

			var got []codes.Code
			var header, trailer metadata.MD
			for range 3 {
				_, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
				got = append(got, status.Code(err))
			}
			watch, err := client.Watch(t.Context(), &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
			_, err = watch.Recv()
			got = append(got, status.Code(err))

			denials := logs.lines(t, grpclimit.ShadowDenialMessage)
			if !shadow {
				require.Equal(t, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted, codes.ResourceExhausted}, got)
				require.Empty(t, denials)
				require.Equal(t, []bool{false, false, false, false}, probe.shadows())
				return
			}
			require.Equal(t, []codes.Code{codes.OK, codes.OK, codes.OK, codes.OK}, got, "a shadow policy never fails a call")
			for k := range header {
				require.NotContains(t, k, "retry", "no metadata tells the client")
			}
			for k := range trailer {
				require.NotContains(t, k, "retry", "no metadata tells the client")
			}
			require.Equal(t, []bool{true, true, true, true}, probe.shadows(), "every decision is a shadow one")
			require.Len(t, denials, 2, "one line per would-be denial (the third call, the stream)")
			require.Equal(t, "per-peer", denials[0]["policy"])
			require.Equal(t, "127.0.0.1", denials[0]["key"])
			require.Equal(t, "/grpc.health.v1.Health/Check", denials[0]["method"])
			require.Equal(t, "/grpc.health.v1.Health/Watch", denials[1]["method"])
			require.Equal(t, "INFO", denials[0]["level"])

			// Counted: the same policy enforced on the same store fails.
			enforced := serve(t, grpclimit.Policy{Name: "per-peer", Limiter: tb, Limit: limit})
			_, err = enforced.Check(t.Context(), &healthpb.HealthCheckRequest{})
			require.Equal(t, codes.ResourceExhausted, status.Code(err), "the shadow policy's calls were counted")
		})
	}
}

// TestShadowPolicyErrorsLetCallsThrough: a shadow policy's key or limiter
// error is logged, and the call goes on to the enforced policies.
func TestShadowPolicyErrorsLetCallsThrough(t *testing.T) {
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	client := serve(t,
		grpclimit.Policy{Name: "keyless", Limiter: broken{}, Limit: sluice.PerSecond(1), Shadow: true, Logger: logger,
			Key: func(context.Context, string) (string, error) { return "", context.Canceled }},
		grpclimit.Policy{Name: "broken", Limiter: broken{}, Limit: sluice.PerSecond(1), Shadow: true, Logger: logger})
	_, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.Len(t, logs.lines(t, "grpclimit: shadow policy: no key; the call goes on"), 1)
	require.Len(t, logs.lines(t, "grpclimit: shadow policy: no rate-limit decision; the call goes on"), 1)
}
