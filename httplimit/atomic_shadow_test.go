package httplimit_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/multilimit"
)

// TestAtomicShadowNeverDenies: an Atomic group with Shadow decides and
// counts every request all or nothing, as if enforced, but lets it
// through with no rate-limit field, and logs each would-be denial with
// the policy that would deny and the key; the same group enforced on the
// same store then denies at once, the shadow run having spent the route's
// limit and nothing more of the tenant's.
func TestAtomicShadowNeverDenies(t *testing.T) {
	store := newMemStore(t)
	multi, err := multilimit.New(store)
	require.NoError(t, err)
	group := httplimit.Atomic{Limiter: multi, Key: httplimit.Header("X-API-Key"), Policies: []httplimit.AtomicPolicy{
		{Name: "tenant", Limit: sluice.PerMinute(100)}, {Name: "route", Limit: sluice.PerMinute(2)},
	}}
	var logs bytes.Buffer
	shadow := group
	shadow.Shadow = true
	mw, err := httplimit.AtomicMiddleware(shadow, httplimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	require.NoError(t, err)
	h := mw(ok)
	var codes []int
	var last *httptest.ResponseRecorder
	for range 3 {
		last = httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/items", nil)
		r.Header.Set("X-API-Key", "k")
		h.ServeHTTP(last, r)
		codes = append(codes, last.Code)
	}
	require.Equal(t, []int{200, 200, 200}, codes, "a shadow group never denies")
	for _, name := range limitingHeaders {
		require.Empty(t, last.Header().Values(name), "%s tells the client of a shadow group", name)
	}
	denials := logLines(t, &logs, httplimit.ShadowDenialMessage)
	require.Len(t, denials, 1, "one line per would-be denial: %s", logs.String())
	require.Equal(t, "route", denials[0]["policy"])
	require.Equal(t, "k", denials[0]["key"])

	enforced := newAtomicServer(t, group)
	resp := get(t, enforced.URL, map[string]string{"X-API-Key": "k"})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the shadow run counted the route's 2")
	require.Equal(t, `"tenant";r=98;t=1`, resp.Header.Values("RateLimit")[0], "and 2 of the tenant's, not the denied third")

	// A request the group cannot key is logged and goes on.
	logs.Reset()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, logs.String(), "no key; the request goes on")
}
