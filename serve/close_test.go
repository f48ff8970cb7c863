package serve_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/serve"
)

// gatedStore holds every script call on a key containing match until open
// is closed; the others go straight to the store.
type gatedStore struct {
	sluice.Store
	match   string
	open    chan struct{}
	entered chan struct{} // closed when a held call arrives
	once    sync.Once
}

func (g *gatedStore) Run(ctx context.Context, s *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if len(keys) > 0 && strings.Contains(keys[0], g.match) {
		g.once.Do(func() { close(g.entered) })
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.Run(ctx, s, keys, args)
}

// TestCloseAlsoClosesTheReplacedPolicies: Server.Close, which sluice-serve
// calls on SIGTERM before it closes the Redis client and exits, waits for
// the policies a reload replaced as well as those in force: while a call
// on the replaced policies is in flight, Close does not return, and once it
// has, the replaced policies' lease is released (the bucket holds back
// only the one token spent). Before the fix Close closed only the policies
// in force and returned at once, so a SIGTERM right after a SIGHUP could
// exit with the old leases' tokens still reserved.
func TestCloseAlsoClosesTheReplacedPolicies(t *testing.T) {
	mem := newMemStore(t)
	gate := &gatedStore{Store: mem, match: "slow", open: make(chan struct{}), entered: make(chan struct{})}
	config := []byte(`domain: edge
policies:
  - {name: leased, match: [{key: user}], rate: 100, period: 1h, lease: 10}
  - {name: slow, match: [{key: slow}], rate: 100, period: 1h}
`)
	srv, err := serve.New(config, gate, nil, nil)
	require.NoError(t, err)
	openGate := sync.OnceFunc(func() { close(gate.open) })
	t.Cleanup(openGate)
	rls := startRLS(t, srv)

	bucket, err := tokenbucket.New(mem)
	require.NoError(t, err)
	key := sluice.Key("u1", "serve", "edge", "leased")
	limit := sluice.Limit{Rate: 100, Period: time.Hour, Burst: 100}
	peek := func() int64 {
		d, err := bucket.AllowN(context.Background(), key, limit, 0)
		require.NoError(t, err)
		return d.Remaining
	}
	require.Equal(t, ok, ask(t, rls, descriptor("user", "u1")).GetOverallCode())
	require.Less(t, peek(), int64(99), "the lease holds tokens beyond the one spent")

	inFlight := make(chan error, 1)
	go func() {
		_, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("slow", "s1")}})
		inFlight <- err
	}()
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow call did not reach the store")
	}
	require.NoError(t, srv.Reload(config), "the policies the call holds are replaced")

	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a call on the replaced policies was in flight; the bucket holds %d", err, peek())
	case <-time.After(200 * time.Millisecond):
	}
	openGate()
	require.NoError(t, <-inFlight, "the call in flight is served")
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the call in flight")
	}
	require.Equal(t, int64(99), peek(), "the replaced policies' lease gave back what it did not spend")
}
