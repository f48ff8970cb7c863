//go:build unix

package envoydiff_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// burstConfig is a fixed window of 100 a minute, the window whose boundary
// lets 200 through in two seconds.
const burstConfig = "domain: burst\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"

// burst sends n requests for client=value to each service at once (8
// callers per service, every service at the same time) and returns how
// many each admitted.
func burst(t *testing.T, services []*service, value string, n int) []int {
	t.Helper()
	admitted := make([]atomic.Int64, len(services))
	failed := make(chan error, len(services)*n)
	var wg sync.WaitGroup
	for i, s := range services {
		jobs := make(chan struct{}, n)
		for range n {
			jobs <- struct{}{}
		}
		close(jobs)
		for range 8 {
			wg.Go(func() {
				req := buildRequest("burst", desc("client", value))
				for range jobs {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					resp, err := s.rls.ShouldRateLimit(ctx, req)
					cancel()
					switch {
					case err != nil:
						failed <- fmt.Errorf("%s: %w", s.name, err)
					case resp.GetOverallCode() == rlsv3.RateLimitResponse_OK:
						admitted[i].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Fatal(err)
	}
	out := make([]int, len(services))
	for i := range admitted {
		out[i] = int(admitted[i].Load())
	}
	return out
}

// acrossBoundary waits until one second before the next minute boundary
// (at most a minute), sends 100 requests to each service before the
// boundary and 100 after it, and returns what each admitted before and
// after, and the time from the first request sent to the last answered. A
// first burst that does not end before the boundary (a loaded machine) is
// tried again at the next minute, with a new client, up to three times.
func acrossBoundary(t *testing.T, services []*service) (before, after []int, took time.Duration) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		now := time.Now()
		boundary := now.Truncate(time.Minute).Add(time.Minute)
		if boundary.Sub(now) < 1500*time.Millisecond {
			boundary = boundary.Add(time.Minute)
		}
		time.Sleep(time.Until(boundary.Add(-time.Second)))
		start := time.Now()
		value := fmt.Sprintf("c%d", attempt)
		before = burst(t, services, value, 100)
		if late := time.Since(boundary); late >= 0 {
			if attempt == 3 {
				t.Fatalf("100 requests per service did not fit in the second before a minute boundary in 3 tries (the last ended %s after it)", late)
			}
			t.Logf("the burst before the boundary ended %s after it: trying again at the next minute", late)
			continue
		}
		time.Sleep(time.Until(boundary.Add(50 * time.Millisecond)))
		after = burst(t, services, value, 100)
		took = time.Since(start)
		t.Logf("across %s: admitted %v before the boundary, %v after, in %s", boundary.Format("15:04:05"), before, after, took.Round(time.Millisecond))
		return before, after, took
	}
}

// overlayEnv is sluice-serve's variable naming its overlay file (Sluice's
// algorithms for rules of an envoyproxy/ratelimit configuration).
const overlayEnv = "SLUICE_OVERLAY"

// TestWindowBoundary is issue 26's boundary case. A 100/MINUTE fixed
// window admits 100 in the second before a minute boundary and 100 more in
// the second after it, 200 in two seconds: so do envoyproxy/ratelimit and
// sluice-serve's default (the fixed window, as theirs). The same rule
// under a token bucket (an overlay file, the YAML unchanged) admits the
// burst of 100 and then only what refills at 100 a minute.
func TestWindowBoundary(t *testing.T) {
	p := startPair(t, pairConfig{files: map[string]string{"burst.yaml": burstConfig}})
	overlay := filepath.Join(t.TempDir(), "overlay.yaml")
	if err := os.WriteFile(overlay, []byte("rules:\n  burst.client:\n    algorithm: tokenbucket\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	redis := startRedisTarget(t, single)
	bucket := launchReady(t, "ours with the token bucket overlay", ourBinary(t),
		merge(p.runtime.env(), redis.env(), map[string]string{overlayEnv: overlay}))
	r := bucket.send(t, overGRPC, buildRequest("burst", withHits(desc("client", "probe"), 0)))
	if l := r.resp.GetStatuses()[0].GetCurrentLimit(); l.GetRequestsPerUnit() != 100 || l.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Fatalf("under the overlay, current_limit is %v; it stays the rule's 100 per MINUTE", l)
	}

	before, after, took := acrossBoundary(t, []*service{p.theirs, p.ours, bucket})
	for i, s := range p.both() {
		if before[i] != 100 || after[i] != 100 {
			t.Fatalf("%s admitted %d before the boundary and %d after; a fixed window of 100 a minute admits 100 and 100", s.name, before[i], after[i])
		}
	}
	// The bucket starts full (burst: the rule's 100) and refills 100 a
	// minute: over took, at most 100 + 100 × took / 1 min.
	bound := 100 + int(math.Ceil(100*took.Seconds()/60))
	if got := before[2] + after[2]; before[2] != 100 || got > bound {
		t.Fatalf("the token bucket admitted %d before the boundary and %d after, %d in %s; want 100, then at most %d in all", before[2], after[2], got, took, bound)
	}
}
