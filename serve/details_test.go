package serve_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/serve"
)

// keyStore records the keys of every script run, in process.
type keyStore struct {
	mu   sync.Mutex
	keys []string
	next sluice.Store
}

func (k *keyStore) Run(ctx context.Context, s *sluice.Script, keys []string, args []int64) ([]int64, error) {
	k.mu.Lock()
	k.keys = append(k.keys, keys...)
	k.mu.Unlock()
	return k.next.Run(ctx, s, keys, args)
}

// TestDetailsOfTheResponse holds what docs/serve.md states of keys and
// answers: a descriptor's values, joined by 0x1F, are the key's hash tag,
// a value over 64 bytes is replaced by its SHA-256; a period that is not
// a unit is stated per the unit it divides (10 per 30 s is 20 per
// MINUTE); Retry-After is the longest wait of the denied descriptors; a
// store that fails with no fallback is UNAVAILABLE; /v1/allow answers a
// denial with 200.
func TestDetailsOfTheResponse(t *testing.T) {
	store := &keyStore{next: newMemStore(t)}
	srv, err := serve.New([]byte(`domain: edge
policies:
  - {name: pair, match: [{key: a}, {key: b}], rate: 10, period: 30s}
  - {name: slow, match: [{key: s}], rate: 1, period: 1m}
  - {name: fast, match: [{key: f}], rate: 1, period: 2s}
`), store, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	c := startRLS(t, srv)

	long := strings.Repeat("x", 65)
	resp := ask(t, c, descriptor("a", "v1", "b", long))
	sum := sha256.Sum256([]byte(long))
	want := sluice.Key("v1\x1fsha256:"+base64.RawURLEncoding.EncodeToString(sum[:]), "serve", "edge", "pair")
	require.Contains(t, store.keys[len(store.keys)-1], want)
	limit := resp.GetStatuses()[0].GetCurrentLimit()
	require.Equal(t, uint32(20), limit.GetRequestsPerUnit())
	require.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, limit.GetUnit())

	ask(t, c, descriptor("s", "x"), descriptor("f", "x"))
	denied := ask(t, c, descriptor("s", "x"), descriptor("f", "x"))
	require.Equal(t, over, denied.GetOverallCode())
	retry := ""
	for _, h := range denied.GetResponseHeadersToAdd() {
		if h.GetKey() == "Retry-After" {
			retry = h.GetValue()
		}
	}
	require.Equal(t, "60", retry, "the longer of 60 s and 2 s")

	web := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(web.Close)
	for range 2 {
		r, err := http.Post(web.URL+"/v1/allow", "application/json", strings.NewReader(`{"policy": "slow", "key": "y"}`))
		require.NoError(t, err)
		_ = r.Body.Close()
		require.Equal(t, http.StatusOK, r.StatusCode, "a decision, allowed or not, is 200")
	}

	down, err := serve.New([]byte("domain: edge\npolicies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s}\n"), downStore{}, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = down.Close() })
	_, err = startRLS(t, down).ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("u", "1")}})
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}
