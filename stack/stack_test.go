package stack_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

func newStore(t *testing.T) *memstore.Store {
	t.Helper()
	s, err := memstore.New()
	require.NoError(t, err)
	return s
}

func hourly(rate int64) stack.Spec {
	return stack.Spec{Rate: stack.Int(rate), Period: stack.Duration(time.Hour)}
}

// TestBuildRefusesWhatCanNeverWork: each mistake is refused when the stack
// is built, naming its field; a cost that a share or a fallback's local
// share can never allow among them.
func TestBuildRefusesWhatCanNeverWork(t *testing.T) {
	with := func(f func(*stack.Spec)) stack.Spec {
		s := hourly(10)
		f(&s)
		return s
	}
	for _, c := range []struct {
		name string
		spec stack.Spec
		want string
	}{
		{"no rate", stack.Spec{Period: stack.Duration(time.Second)}, "rate, period or burst:"},
		{"unknown algorithm", with(func(s *stack.Spec) { s.Algorithm = "leakybucket" }), `algorithm: unknown "leakybucket"`},
		{"negative cost", with(func(s *stack.Spec) { s.Cost = -1 }), "cost: -1 is negative"},
		{"cost above the burst", with(func(s *stack.Spec) { s.Cost = 11 }), "cost: 11 can never be allowed: the limit's capacity is 10"},
		{"a window algorithm's burst", with(func(s *stack.Spec) { s.Algorithm, s.Burst = "fixedwindow", 20 }), "burst: 20, but fixedwindow has no burst"},
		{"cost above a share", with(func(s *stack.Spec) { s.Shards, s.Cost = 4, 3 }), "cost: 3 can never be allowed on a sharded key, whose smallest share of 4 admits less"},
		{"cost above a hot key's share", with(func(s *stack.Spec) { s.Shards, s.Cost, s.HotKeys = 4, 3, []string{"tenant-42"} }), "cost: 3 can never be allowed on a sharded key"},
		{"cost above the local share", with(func(s *stack.Spec) { s.Fallback, s.Replicas, s.Cost = "local", 4, 3 }),
			"cost: 3 can never be allowed while the store fails: fallback: local gives each of 4 replicas 2 at most"},
		{"one shard", with(func(s *stack.Spec) { s.Shards = 1 }), "shards: 1 (0 for none, or 2 to 64)"},
		{"negative lease", with(func(s *stack.Spec) { s.Lease = -1 }), "lease: -1 is negative"},
		{"a lease of a window", with(func(s *stack.Spec) { s.Algorithm, s.Lease = "slidingcounter", 5 }), "lease: lease: sluice: the wrapped limiter does not support this"},
		{"hot keys alone", with(func(s *stack.Spec) { s.HotKeys = []string{"a"} }), "hot_keys: they choose the keys to lease or shard"},
		{"an empty hot key", with(func(s *stack.Spec) { s.Lease, s.HotKeys = 5, []string{""} }), "lease: lease: WithHotKeys"},
		{"replicas alone", with(func(s *stack.Spec) { s.Replicas = 3 }), "fallback_timeout and replicas configure a fallback"},
		{"replicas of open", with(func(s *stack.Spec) { s.Fallback, s.Replicas = "open", 3 }), `replicas: only fallback: local uses them, not "open"`},
		{"local without replicas", with(func(s *stack.Spec) { s.Fallback = "local" }), "replicas: fallback: local needs the number of processes"},
		{"unknown fallback", with(func(s *stack.Spec) { s.Fallback = "maybe" }), `fallback: unknown "maybe"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := stack.Build(c.spec, newStore(t))
			require.ErrorContains(t, err, c.want)
			require.Nil(t, st)
		})
	}
	_, err := stack.Build(hourly(10), nil)
	require.ErrorContains(t, err, "stack: the store must not be nil")
	_, err = stack.Build(hourly(10), newStore(t), nil)
	require.ErrorContains(t, err, "stack: option 0 is nil")
}

// TestTheCostAShareAllowsIsBuilt: the largest cost every share allows
// builds, on every key and on hot keys only.
func TestTheCostAShareAllowsIsBuilt(t *testing.T) {
	spec := hourly(10)
	spec.Shards, spec.Cost = 4, 2 // shares of 2 or 3
	st, err := stack.Build(spec, newStore(t))
	require.NoError(t, err)
	d, err := st.Allow(t.Context(), sluice.Key("tenant-42"))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.NoError(t, st.Close())
}

// TestEveryLayerIsBuilt: a spec with every feature builds a stack that
// decides, serves what its layers serve, admits the whole limit through
// one process (a shard wraps the lease, so the process reaches every
// share, where lease(shard) would give it one share), and gives its
// lease back on Close.
func TestEveryLayerIsBuilt(t *testing.T) {
	store := newStore(t)
	spec := stack.Spec{
		Rate: 40, Period: stack.Duration(time.Hour), Coalesce: true, Lease: 5, Shards: 4,
		HotKeys: []string{"tenant-42"}, DenyCache: true, Fallback: "local", Replicas: 2,
		FallbackTimeout: stack.Duration(time.Second), Tracing: true,
	}
	st, err := stack.Build(spec, store, stack.WithName("api"))
	require.NoError(t, err)
	require.Equal(t, sluice.Limit{Rate: 40, Period: time.Hour, Burst: 40}, st.Limit())
	require.EqualValues(t, 1, st.Cost())
	require.True(t, st.Refills())
	require.Equal(t, []string{"sluiceotel", "fallback", "denycache", "shard", "lease", "coalesce", "tokenbucket"}, st.Layers())
	require.Equal(t, "tokenbucket", st.AlgorithmName())
	_, leases := sluice.As[ext.Leaser](st)
	require.False(t, leases, "a lease does not lease to a layer above it")
	_, resets := sluice.As[sluice.Resetter](st)
	require.True(t, resets)
	_, bounded := sluice.As[sluice.Bounded](st)
	require.True(t, bounded)

	hot := sluice.Key("tenant-42")
	allowed := 0
	for range 60 {
		d, err := st.Allow(t.Context(), hot)
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		}
	}
	require.GreaterOrEqual(t, allowed, 20, "at least the two smallest of the 4 shares of 10")
	require.LessOrEqual(t, allowed, 40)

	cold := sluice.Key("tenant-7")
	for range 40 {
		d, err := st.Allow(t.Context(), cold)
		require.NoError(t, err)
		require.True(t, d.Allowed, "a key neither leased nor sharded gets its whole limit")
	}
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "twice")
}

// TestSpecsReadFromFiles: a Spec inline in a policy of YAML or JSON; a
// number that is not whole and a duration that is not one are refused.
func TestSpecsReadFromFiles(t *testing.T) {
	type policy struct {
		Name       string `yaml:"name" json:"name"`
		stack.Spec `yaml:",inline"`
	}
	var p policy
	require.NoError(t, yaml.Unmarshal([]byte("name: api\nrate: 100\nperiod: 1m\nlease: 10\nhot_keys: [a, b]\nfallback_timeout: 50ms\n"), &p))
	require.Equal(t, policy{Name: "api", Spec: stack.Spec{Rate: 100, Period: stack.Duration(time.Minute), Lease: 10,
		HotKeys: []string{"a", "b"}, FallbackTimeout: stack.Duration(50 * time.Millisecond)}}, p)
	var j policy
	require.NoError(t, json.Unmarshal([]byte(`{"name":"api","rate":100,"period":"1m","deny_cache":true}`), &j))
	require.Equal(t, policy{Name: "api", Spec: stack.Spec{Rate: 100, Period: stack.Duration(time.Minute), DenyCache: true}}, j)

	for _, bad := range []string{"rate: 2.9", "rate: 1e3", "burst: 0x10", "rate: [1]", "period: 60", "period: soon"} {
		require.Error(t, yaml.Unmarshal([]byte(bad), &p), bad)
	}
	for _, bad := range []string{`{"rate":2.9}`, `{"rate":1e3}`, `{"period":60}`, `{"period":"soon"}`} {
		require.Error(t, json.Unmarshal([]byte(bad), &j), bad)
	}
}
