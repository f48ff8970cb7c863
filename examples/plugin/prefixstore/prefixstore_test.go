package prefixstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/examples/plugin/prefixstore"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/memstore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const prefix = "tenant-a:"

// prefixed wraps a tier's store in a prefixstore, and looks at what it
// stored under the prefixed keys.
func prefixed(newTier func(t *testing.T) sluicetest.Tier) func(t *testing.T) sluicetest.Tier {
	return func(t *testing.T) sluicetest.Tier {
		tier := newTier(t)
		store, err := prefixstore.New(tier.Store, prefix)
		if err != nil {
			t.Fatal(err)
		}
		get, ttl, raw := tier.Get, tier.TTL, tier.Raw
		tier.Name += "/prefixed"
		tier.Store = store
		tier.Get = func(ctx context.Context, key string) (string, bool, error) { return get(ctx, prefix+key) }
		tier.TTL = func(ctx context.Context, key string) (time.Duration, bool, error) { return ttl(ctx, prefix+key) }
		if raw != nil { // runs scripts on the client, past the store: the keys prefixed here
			tier.Raw = func(ctx context.Context, script *sluice.Script, keys []string, args ...string) ([]int64, error) {
				under := make([]string, len(keys))
				for i, k := range keys {
					under[i] = prefix + k
				}
				return raw(ctx, script, under, args...)
			}
		}
		return tier
	}
}

// TestConformance: every built-in algorithm decides through the prefix
// store as it does on the store the prefix store wraps, on every tier (a
// Redis Cluster included: the prefix keeps the keys' hash tags), and its
// state lives under the prefixed keys only.
func TestConformance(t *testing.T) {
	for _, tier := range redistest.AllTiers() {
		t.Run(tier.Name, func(t *testing.T) { sluicetest.RunConformance(t, prefixed(tier.Make), builtins.Algorithms...) })
	}
}

func TestKeysCarryThePrefix(t *testing.T) {
	inner := newMemStore(t)
	store, err := prefixstore.New(inner, prefix)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := tokenbucket.New(store)
	if err != nil {
		t.Fatal(err)
	}
	key := sluice.Key("42")
	if _, err := tb.AllowN(t.Context(), key, sluice.PerMinute(10), 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := inner.Value(prefix + key + tokenbucket.KeySuffix); !ok {
		t.Fatalf("no state under the prefixed key")
	}
	if _, ok := inner.Value(key + tokenbucket.KeySuffix); ok {
		t.Fatalf("state under the bare key")
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, c := range []struct {
		name   string
		next   sluice.Store
		prefix string
		want   string
	}{
		{"nil store", nil, prefix, "must not be nil"},
		{"empty prefix", newMemStore(t), "", "must not be empty"},
		{"a brace", newMemStore(t), "t{1}:", "hash slots"},
	} {
		s, err := prefixstore.New(c.next, c.prefix)
		if err == nil || !strings.Contains(err.Error(), c.want) || s != nil {
			t.Errorf("%s: New = %v, %v; want an error saying %q", c.name, s, err, c.want)
		}
	}
}
