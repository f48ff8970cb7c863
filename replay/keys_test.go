package replay

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay/accesslog"
)

// keyed is a record at t0 plus ms milliseconds from client for tenant:
// Keys {client, tenant}, as a reader with KeysFrom {client, tenant}
// gives it.
func keyed(client, tenant string, ms int) accesslog.Record {
	r := at(client, ms)
	r.Keys = []string{client, tenant}
	return r
}

// TestPoliciesKeyedDifferently: each policy is keyed by its own key of
// the record (Policy.KeyIndex): 2 a second per client and 3 a second per
// tenant, in order, so that a request the client policy denies never
// reaches the tenant's.
func TestPoliciesKeyedDifferently(t *testing.T) {
	recs := []accesslog.Record{
		keyed("10.0.0.1", "acme", 0), keyed("10.0.0.1", "acme", 1), keyed("10.0.0.1", "acme", 2), // the client's third is over
		keyed("10.0.0.2", "acme", 3), keyed("10.0.0.3", "acme", 4), // the tenant's third allowed, fourth over
		keyed("10.0.0.4", "globex", 5),
	}
	cfg := Config{Algorithms: []string{"fixedwindow"}, Policies: []Policy{
		{Name: "per-client", Limit: sluice.PerSecond(2)},
		{Name: "per-tenant", Limit: sluice.PerSecond(3), KeyIndex: 1},
	}}
	_, got := decisions(t, cfg, recs...)
	require.Equal(t, "++-+++", allowedOf(got["per-client/fixedwindow"]))
	require.Equal(t, "+++-+", allowedOf(got["per-tenant/fixedwindow"]), "the client policy's denial never reaches it")
	var keys []string
	for _, d := range got["per-tenant/fixedwindow"] {
		keys = append(keys, d.Key)
	}
	require.Equal(t, []string{"acme", "acme", "acme", "acme", "globex"}, keys)
	require.Equal(t, "10.0.0.2", got["per-client/fixedwindow"][3].Key)
}

// TestAKeyTheRecordLacksIsAnError: a policy keyed by a key the records do
// not carry ends the replay with an error naming it and the line; a
// negative index is refused at the start.
func TestAKeyTheRecordLacksIsAnError(t *testing.T) {
	cfg := Config{Policies: []Policy{{Name: "per-tenant", Limit: sluice.PerSecond(3), KeyIndex: 1}}}
	_, err := Run(context.Background(), &records{recs: []accesslog.Record{at("10.0.0.1", 0)}}, cfg)
	require.ErrorContains(t, err, `replay: policy "per-tenant" is keyed by the record's key 1, and line 1 has 1`)
	cfg.Policies[0].KeyIndex = -1
	_, err = Run(context.Background(), &records{recs: []accesslog.Record{at("10.0.0.1", 0)}}, cfg)
	require.ErrorContains(t, err, "key index -1 is negative")
}

// TestAPolicyWithoutItsKey: a record that lacks the key of a policy that
// applies to it and is enforced is refused (httplimit answers 400 before
// any policy counts it): a skipped line naming the policy, counted by no
// policy. One that lacks the key of a policy that does not apply to it,
// or of a shadow policy, counts under the others.
func TestAPolicyWithoutItsKey(t *testing.T) {
	api := func(client string, ms int) accesslog.Record {
		r := keyed(client, "", ms)
		r.Path = "/api/x"
		return r
	}
	recs := []accesslog.Record{keyed("10.0.0.1", "", 0), api("10.0.0.1", 1), keyed("10.0.0.1", "acme", 2)}
	for _, shadow := range []bool{false, true} {
		cfg := Config{Algorithms: []string{"fixedwindow"}, Policies: []Policy{
			{Name: "per-client", Limit: sluice.PerSecond(10)},
			{Name: "per-tenant", Limit: sluice.PerSecond(10), KeyIndex: 1, Routes: []string{"/api/"}, Shadow: shadow},
		}}
		rep, got := decisions(t, cfg, recs...)
		if shadow {
			require.Equal(t, "+++", allowedOf(got["per-client/fixedwindow"]), "the shadow policy without its key stops nothing")
			require.Zero(t, rep.Input.Skipped)
			continue
		}
		require.Equal(t, "++", allowedOf(got["per-client/fixedwindow"]), "the /api/ request without a tenant counts nowhere")
		require.Empty(t, got["per-tenant/fixedwindow"], "the /api/ request was refused, the others are not its")
		require.Equal(t, int64(1), rep.Input.Skipped)
		require.Equal(t, accesslog.LineError{Line: 2, Reason: `no key for policy "per-tenant", which would refuse the request (400)`}, rep.Input.SkippedLines[0])
	}
}

// TestTiersFollowThePolicysKey: a tiered policy keyed by the record's
// second key chooses its tier by that key, not by the first.
func TestTiersFollowThePolicysKey(t *testing.T) {
	tierOf := func(key string) string {
		if strings.HasPrefix(key, "pro-") {
			return "pro"
		}
		return "free"
	}
	cfg := Config{Algorithms: []string{"fixedwindow"}, Policies: []Policy{
		{Name: "plan/free", Limit: sluice.PerSecond(1), KeyIndex: 1, TierOf: tierOf, Tier: "free"},
		{Name: "plan/pro", Limit: sluice.PerSecond(5), KeyIndex: 1, TierOf: tierOf, Tier: "pro"},
	}}
	_, got := decisions(t, cfg, keyed("10.0.0.1", "pro-acme", 0), keyed("10.0.0.2", "pro-acme", 1), keyed("10.0.0.3", "globex", 2))
	require.Equal(t, "++", allowedOf(got["plan/pro/fixedwindow"]))
	require.Equal(t, "+", allowedOf(got["plan/free/fixedwindow"]))
}
