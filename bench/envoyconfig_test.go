package bench

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/serve"
)

// TestEnvoyConfigOfTheDocs: the Envoy configuration in docs/serve.md is a
// valid v3 bootstrap (go-control-plane's types and validation rules), its
// ratelimit filter names the example policies' domain and the sluice_serve
// cluster over the V3 transport, and the descriptors its routes' actions
// build (as Envoy builds them: entries in the actions' order, a descriptor
// left out when its request header is absent) are decided by sluice serve,
// on serve/policies.example.yaml, by the policies the comments name.
func TestEnvoyConfigOfTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/serve.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "```yaml\nstatic_resources:")
	require.True(t, ok, "docs/serve.md has the Envoy configuration")
	block, _, ok := strings.Cut("static_resources:"+rest, "```")
	require.True(t, ok)

	var tree any
	require.NoError(t, yaml.Unmarshal([]byte(block), &tree))
	js, err := json.Marshal(tree)
	require.NoError(t, err)
	var boot bootstrapv3.Bootstrap
	require.NoError(t, protojson.Unmarshal(js, &boot))
	require.NoError(t, boot.ValidateAll())

	listeners := boot.GetStaticResources().GetListeners()
	require.Len(t, listeners, 1)
	var hcm hcmv3.HttpConnectionManager
	require.NoError(t, listeners[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm))
	require.NoError(t, hcm.ValidateAll())
	var rl ratelimitfilterv3.RateLimit
	require.Equal(t, "envoy.filters.http.ratelimit", hcm.GetHttpFilters()[0].GetName())
	require.NoError(t, hcm.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(&rl))
	require.NoError(t, rl.ValidateAll())
	require.Equal(t, "sluice_serve", rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName())
	require.Equal(t, "V3", rl.GetRateLimitService().GetTransportApiVersion().String())
	var clusters []string
	for _, c := range boot.GetStaticResources().GetClusters() {
		clusters = append(clusters, c.GetName())
	}
	require.Contains(t, clusters, "sluice_serve")

	policies, err := os.ReadFile("../serve/policies.example.yaml")
	require.NoError(t, err)
	config, err := serve.ParseConfig(policies)
	require.NoError(t, err)
	require.Equal(t, config.Domain, rl.GetDomain(), "the filter's domain is the policy file's")
	srv, err := serve.New(policies, newMemStore(t), nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })

	routes := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	for _, c := range []struct {
		path   string
		userID string
		want   []string
	}{
		{"/orders", "alice", []string{"orders", "per-user", "per-ip"}},
		{"/orders", "", []string{"per-ip"}},
		{"/cart", "alice", []string{"per-user", "per-ip"}},
		{"/", "", []string{"per-ip"}},
	} {
		descriptors := envoyDescriptors(t, routes, c.path, map[string]string{"x-user-id": c.userID}, "10.0.0.1")
		resp, err := srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: rl.GetDomain(), Descriptors: descriptors})
		require.NoError(t, err, c.path)
		var got []string
		for _, st := range resp.GetStatuses() {
			got = append(got, st.GetCurrentLimit().GetName())
		}
		require.Equal(t, c.want, got, "%s with x-user-id %q", c.path, c.userID)
	}
}

// envoyDescriptors builds the descriptors of a request as Envoy's rate
// limit actions would, for the three actions the documentation uses: the
// first route whose prefix matches path, each of its rate_limits one
// descriptor, left out when a request_headers action's header is absent.
func envoyDescriptors(t *testing.T, routes []*routev3.Route, path string, headers map[string]string, remote string) []*ratelimitv3.RateLimitDescriptor {
	t.Helper()
	for _, r := range routes {
		if !strings.HasPrefix(path, r.GetMatch().GetPrefix()) {
			continue
		}
		var out []*ratelimitv3.RateLimitDescriptor
	limits:
		for _, limit := range r.GetRoute().GetRateLimits() {
			d := &ratelimitv3.RateLimitDescriptor{}
			for _, a := range limit.GetActions() {
				var e *ratelimitv3.RateLimitDescriptor_Entry
				switch {
				case a.GetRequestHeaders() != nil:
					v := headers[a.GetRequestHeaders().GetHeaderName()]
					if v == "" {
						continue limits
					}
					e = &ratelimitv3.RateLimitDescriptor_Entry{Key: a.GetRequestHeaders().GetDescriptorKey(), Value: v}
				case a.GetGenericKey() != nil:
					e = &ratelimitv3.RateLimitDescriptor_Entry{Key: a.GetGenericKey().GetDescriptorKey(), Value: a.GetGenericKey().GetDescriptorValue()}
					if e.Key == "" {
						e.Key = "generic_key"
					}
				case a.GetRemoteAddress() != nil:
					e = &ratelimitv3.RateLimitDescriptor_Entry{Key: "remote_address", Value: remote}
				default:
					t.Fatalf("an action this test does not model: %v", a)
				}
				d.Entries = append(d.Entries, e)
			}
			out = append(out, d)
		}
		return out
	}
	t.Fatalf("no route for %s", path)
	return nil
}
