package plugin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/examples/plugin/firstwindow"
	"github.com/sluicehq/sluice/examples/plugin/prefixstore"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/embedded"
)

// TestAnOutsideAlgorithmAndStoreUnderEveryLayer: the algorithm and the
// store of this module, written on Sluice's public API alone, work under
// coalesce (which batches them with the framework's batch script),
// fallback, sluiceotel and the HTTP middleware, on the embedded miniredis
// running firstwindow's Lua.
func TestAnOutsideAlgorithmAndStoreUnderEveryLayer(t *testing.T) {
	server, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = server.Close() })
	store, err := prefixstore.New(server, "tenant-a:")
	require.NoError(t, err)
	fw, err := firstwindow.New(store)
	require.NoError(t, err)
	co, err := coalesce.New(fw)
	require.NoError(t, err)
	fb, err := fallback.New(co, fallback.WithTimeout(10*time.Second))
	require.NoError(t, err)
	limiter, err := sluiceotel.New(fb, sluiceotel.WithAlgorithm("firstwindow"))
	require.NoError(t, err)
	require.Equal(t, []string{"refund", "reset", "batch", "bound"}, sluicetest.Capabilities(t, limiter),
		"every layer serves what the outside algorithm serves, and no lease")

	// Concurrent calls share script calls: coalesce batches the outside
	// algorithm through the batch script the framework built from its body.
	limit := sluice.Limit{Rate: 1000, Period: time.Hour, Burst: 1000}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 10 {
				d, err := limiter.AllowN(t.Context(), sluice.Key("hot"), limit, 1)
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
		})
	}
	wg.Wait()
	d, err := limiter.AllowN(t.Context(), sluice.Key("hot"), limit, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1000-640), d.Remaining, "every decision counted once")
	require.Positive(t, co.Stats().Batches, "some calls shared a batch script call")
	require.True(t, server.Server().Exists("tenant-a:"+sluice.Key("hot")+firstwindow.KeySuffix), "the state lives under the prefix")

	mw, err := httplimit.Middleware([]httplimit.Policy{{
		Name: "api", Limiter: limiter, Limit: sluice.PerMinute(3), Key: httplimit.Header("X-Tenant"),
	}})
	require.NoError(t, err)
	handler := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	var codes []int
	var last *httptest.ResponseRecorder
	for range 4 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Tenant", "42")
		last = httptest.NewRecorder()
		handler.ServeHTTP(last, req)
		codes = append(codes, last.Code)
	}
	require.Equal(t, []int{204, 204, 204, 429}, codes)
	require.NotEmpty(t, last.Header().Get("Retry-After"))
	require.True(t, strings.HasPrefix(last.Header().Get("RateLimit"), `"api";r=0`), last.Header().Get("RateLimit"))
}
