package serve_test

import (
	"context"
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/serve"
	"github.com/sluicehq/sluice/store/memstore"
)

// A Server on the in-process store, deciding by one policy: 2 requests a
// minute per user_id. Envoy would send these requests over gRPC; here
// ShouldRateLimit is called directly. The third is over the limit, and
// the response carries what Envoy adds to the client's response.
func ExampleServer_ShouldRateLimit() {
	config := []byte(`
domain: edge
unknown: deny
policies:
  - name: per-user
    match:
      - key: user_id
    rate: 2
    period: 1m
`)
	store, err := memstore.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := serve.New(config, store, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	ask := func(key, value string) {
		resp, err := srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
			Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}},
			}},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(resp.GetOverallCode())
		for _, st := range resp.GetStatuses() {
			if l := st.GetCurrentLimit(); l != nil {
				fmt.Printf("  status: %d per %s, %d remaining\n", l.GetRequestsPerUnit(), l.GetUnit(), st.GetLimitRemaining())
			}
		}
		for _, h := range resp.GetResponseHeadersToAdd() {
			fmt.Printf("  %s: %s\n", h.GetKey(), h.GetValue())
		}
	}
	for range 3 {
		ask("user_id", "alice")
	}
	ask("user_id", "bob")     // another key, another bucket
	ask("api_key", "k-12345") // no policy matches: unknown: deny
	// Output:
	// OK
	//   status: 2 per MINUTE, 1 remaining
	//   RateLimit-Policy: "per-user";q=2;w=60
	//   RateLimit: "per-user";r=1;t=30
	// OK
	//   status: 2 per MINUTE, 0 remaining
	//   RateLimit-Policy: "per-user";q=2;w=60
	//   RateLimit: "per-user";r=0;t=30
	// OVER_LIMIT
	//   status: 2 per MINUTE, 0 remaining
	//   RateLimit-Policy: "per-user";q=2;w=60
	//   RateLimit: "per-user";r=0;t=30
	//   Retry-After: 30
	// OK
	//   status: 2 per MINUTE, 1 remaining
	//   RateLimit-Policy: "per-user";q=2;w=60
	//   RateLimit: "per-user";r=1;t=30
	// OVER_LIMIT
}
