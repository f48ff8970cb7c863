package serve_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/serve"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// newRLS builds a server from config on a fresh in-process store and
// returns a gRPC client of it.
func newRLS(t *testing.T, config string) rlsv3.RateLimitServiceClient {
	t.Helper()
	srv, err := serve.New([]byte(config), newMemStore(t), nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return startRLS(t, srv)
}

func ask(t *testing.T, c rlsv3.RateLimitServiceClient, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds})
	require.NoError(t, err)
	return resp
}

// TestEveryAlgorithm: a policy of each algorithm, 3 a minute, admits 3 hits
// of its descriptor and then answers OVER_LIMIT, with its limit stated as
// 3 per MINUTE.
func TestEveryAlgorithm(t *testing.T) {
	for _, alg := range []string{"tokenbucket", "gcra", "fixedwindow", "slidingcounter", "slidinglog"} {
		t.Run(alg, func(t *testing.T) {
			c := newRLS(t, fmt.Sprintf("domain: edge\npolicies:\n  - {name: p, match: [{key: user}], algorithm: %s, rate: 3, period: 1m}\n", alg))
			var codes []rlsv3.RateLimitResponse_Code
			var last *rlsv3.RateLimitResponse
			for range 4 {
				last = ask(t, c, descriptor("user", "u1"))
				codes = append(codes, last.GetOverallCode())
			}
			require.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok, ok, over}, codes)
			st := last.GetStatuses()[0]
			require.Equal(t, uint32(3), st.GetCurrentLimit().GetRequestsPerUnit())
			require.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, st.GetCurrentLimit().GetUnit())
			require.Equal(t, "p", st.GetCurrentLimit().GetName())
			require.Positive(t, st.GetDurationUntilReset().AsDuration())
		})
	}
}

const matchingPolicies = `domain: edge
policies:
  - {name: per-user, match: [{key: user}], rate: 1, period: 1m}
  - {name: orders, match: [{key: user}, {key: path, value: /orders}], rate: 2, period: 1m}
`

// TestDescriptorMatching: a descriptor matches the policy whose entries it
// has, in order, keys equal and values equal where the policy gives one;
// each descriptor of a request gets its own status; values are separate
// keys.
func TestDescriptorMatching(t *testing.T) {
	c := newRLS(t, matchingPolicies)
	resp := ask(t, c, descriptor("user", "u1"), descriptor("user", "u1", "path", "/orders"), descriptor("user", "u1", "path", "/other"))
	require.Len(t, resp.GetStatuses(), 3)
	require.Equal(t, "per-user", resp.GetStatuses()[0].GetCurrentLimit().GetName())
	require.Equal(t, "orders", resp.GetStatuses()[1].GetCurrentLimit().GetName())
	require.Nil(t, resp.GetStatuses()[2].GetCurrentLimit(), "/other matches no policy")
	require.Equal(t, ok, resp.GetOverallCode())

	require.Equal(t, over, ask(t, c, descriptor("user", "u1")).GetOverallCode(), "per-user's 1 a minute is spent")
	require.Equal(t, ok, ask(t, c, descriptor("user", "u2")).GetOverallCode(), "another value, another key")
	require.Equal(t, ok, ask(t, c, descriptor("path", "/orders", "user", "u1")).GetOverallCode(), "entries in another order match nothing")
	require.Equal(t, ok, ask(t, c, descriptor("user", "u1", "path", "/orders")).GetOverallCode(), "orders' second")
	both := ask(t, c, descriptor("user", "u1", "path", "/orders"), descriptor("user", "u3"))
	require.Equal(t, over, both.GetOverallCode(), "orders' 2 a minute are spent")
	require.Equal(t, over, both.GetStatuses()[0].GetCode())
	require.Equal(t, ok, both.GetStatuses()[1].GetCode())
}

// TestUnknownDescriptors: a descriptor no policy matches is allowed, or
// denied when the file says unknown: deny.
func TestUnknownDescriptors(t *testing.T) {
	allow := newRLS(t, matchingPolicies)
	require.Equal(t, ok, ask(t, allow, descriptor("tenant", "t1")).GetOverallCode())
	deny := newRLS(t, "unknown: deny\n"+matchingPolicies)
	resp := ask(t, deny, descriptor("tenant", "t1"))
	require.Equal(t, over, resp.GetOverallCode())
	require.Equal(t, over, resp.GetStatuses()[0].GetCode())
}

// TestBadRequestsConsumeNothing: requests that cannot be served are
// InvalidArgument, with a message saying why, and consume nothing, even
// when their other descriptors are good: afterwards the descriptor still
// has its whole limit.
func TestBadRequestsConsumeNothing(t *testing.T) {
	c := newRLS(t, "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 5, period: 1m}\n")
	good := descriptor("user", "u1")
	many := &ratelimitv3.RateLimitDescriptor{}
	for i := range 10_000 {
		many.Entries = append(many.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: fmt.Sprint("k", i), Value: "v"})
	}
	var tenThousand []*ratelimitv3.RateLimitDescriptor
	for range 10_000 {
		tenThousand = append(tenThousand, good)
	}
	huge := descriptor("user", "u1")
	huge.HitsAddend = wrapperspb.UInt64(1 << 62)
	six := descriptor("user", "u1")
	six.HitsAddend = wrapperspb.UInt64(6)
	for _, bad := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "edge"}, "no descriptors"},
		{"another domain", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*ratelimitv3.RateLimitDescriptor{good}}, "domain"},
		{"10,000 entries", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{good, many}}, "10000 entries"},
		{"10,000 descriptors", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: tenThousand}, "10000 descriptors"},
		{"an entry without a key", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{good, descriptor("", "x")}}, "no key"},
		{"a huge hits_addend", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{good, huge}}, "hits_addend"},
		{"a hits_addend above the limit", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{good, six}}, "hits_addend 6"},
		{"a request hits_addend above the limit", &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 4_000_000_000, Descriptors: []*ratelimitv3.RateLimitDescriptor{good}}, "hits_addend"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := c.ShouldRateLimit(context.Background(), bad.req)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.Contains(t, status.Convert(err).Message(), bad.want)
		})
	}
	resp := ask(t, c, good)
	require.Equal(t, ok, resp.GetOverallCode())
	require.Equal(t, uint32(4), resp.GetStatuses()[0].GetLimitRemaining(), "nothing was consumed by the bad requests")
}

// TestHitsAddend: a descriptor's hits_addend, or else the request's,
// multiplies the policy's cost.
func TestHitsAddend(t *testing.T) {
	c := newRLS(t, "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 10, period: 1m}\n")
	d := descriptor("user", "u1")
	d.HitsAddend = wrapperspb.UInt64(4)
	require.Equal(t, uint32(6), ask(t, c, d).GetStatuses()[0].GetLimitRemaining())
	resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 5,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "u1")}})
	require.NoError(t, err)
	require.Equal(t, uint32(1), resp.GetStatuses()[0].GetLimitRemaining())
}

// TestBadConfigurations: a file that cannot be served is refused by New,
// naming the policy and the field.
func TestBadConfigurations(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"empty", "", "empty"},
		{"no policy", "domain: edge\n", "no policy"},
		{"unknown field", "policies:\n  - {name: p, match: [{key: u}], rate: 1, period: 1s, colour: red}\n", "colour"},
		{"fraction", "policies:\n  - {name: p, match: [{key: u}], rate: 2.5, period: 1s}\n", "rate"},
		{"cost above burst", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s, cost: 6}\n", "cost"},
		{"no match", "policies:\n  - {name: p, rate: 5, period: 1s}\n", "match"},
		{"duplicate names", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s}\n  - {name: p, match: [{key: v}], rate: 5, period: 1s}\n", "taken"},
		{"same descriptor", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s}\n  - {name: q, match: [{key: u}], rate: 5, period: 1s}\n", "same descriptor"},
		{"bad algorithm", "policies:\n  - {name: p, match: [{key: u}], algorithm: leaky, rate: 5, period: 1s}\n", "algorithm"},
		{"bad fallback", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s, fallback: maybe}\n", "fallback"},
		{"local without replicas", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s, fallback: local}\n", "replicas"},
		{"lease on a window", "policies:\n  - {name: p, match: [{key: u}], algorithm: fixedwindow, rate: 5, period: 1s, lease: 2}\n", "lease"},
		{"burst on a window", "policies:\n  - {name: p, match: [{key: u}], algorithm: slidinglog, rate: 5, period: 1s, burst: 9}\n", "burst"},
		{"unknown mode", "unknown: maybe\npolicies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s}\n", "unknown"},
		{"two documents", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s}\n---\npolicies: []\n", "document"},
		{"cost above a share", "policies:\n  - {name: p, match: [{key: u}], rate: 8, period: 1s, shards: 4, cost: 3}\n", "cost: 3 can never be allowed on a sharded key"},
		{"cost above a hot key's share", "policies:\n  - {name: p, match: [{key: u}], rate: 8, period: 1s, shards: 4, hot_keys: [acme], cost: 3}\n", "cost: 3 can never be allowed on a sharded key"},
		{"cost above the local share", "policies:\n  - {name: p, match: [{key: u}], rate: 8, period: 1s, fallback: local, replicas: 4, cost: 3}\n", "cost: 3 can never be allowed while the store fails"},
		{"hot keys alone", "policies:\n  - {name: p, match: [{key: u}], rate: 8, period: 1s, hot_keys: [acme]}\n", "hot_keys"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := serve.New([]byte(c.file), newMemStore(t), nil, nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			if strings.Contains(c.file, "name: p") && c.name != "duplicate names" && c.name != "two documents" && c.name != "unknown field" && c.name != "unknown mode" {
				require.Contains(t, err.Error(), `"p"`)
			}
		})
	}
}
