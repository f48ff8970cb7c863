package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/embedded"
)

func TestService(t *testing.T) {
	store, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	h, err := newHandler(store, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	codes := map[int]int{}
	for range 8 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/orders", nil)
		require.NoError(t, err)
		req.Header.Set("X-API-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		codes[resp.StatusCode]++
		require.NotEmpty(t, resp.Header.Get("RateLimit"))
	}
	require.Equal(t, map[int]int{http.StatusCreated: 5, http.StatusTooManyRequests: 3}, codes, "5 orders a minute per key")

	// The 8 orders also spent 8 of the client's burst of 10.
	hello := map[int]int{}
	for range 5 {
		resp, err := http.Get(srv.URL + "/hello")
		require.NoError(t, err)
		_ = resp.Body.Close()
		hello[resp.StatusCode]++
	}
	require.Equal(t, map[int]int{http.StatusOK: 2, http.StatusTooManyRequests: 3}, hello)
}

// TestConcurrentRequestsAdmitExactlyTheBurst: 200 requests from one client
// at once admit exactly the client's burst of 10, no more: nothing in the
// set-up turns queueing into admissions (a fallback budget shorter than
// the store's queueing under load did: 91 to 157 of 200 against a limit of
// 50).
func TestConcurrentRequestsAdmitExactlyTheBurst(t *testing.T) {
	store, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	// The bucket's clock stands still: 200 concurrent requests take as long
	// as the machine makes them, and a refill in between (one token a
	// second) would admit an eleventh; this test is about the burst.
	h, err := newHandler(store, sluicetest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}

	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 200 {
		wg.Go(func() {
			<-start
			resp, err := client.Get(srv.URL + "/hello")
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusOK: 10, http.StatusTooManyRequests: 190}, codes)
}
