package algorithms_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/store/memstore"
)

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

// TestNewKnowsEveryName: each name builds a limiter that decides; an
// unknown one is an error naming the known ones.
func TestNewKnowsEveryName(t *testing.T) {
	for _, name := range append([]string{""}, algorithms.Names...) {
		l, err := algorithms.New(name, newMemStore(t))
		require.NoError(t, err, name)
		d, err := l.AllowN(t.Context(), "k", sluice.PerSecond(1), 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	_, err := algorithms.New("leaky", newMemStore(t))
	require.ErrorContains(t, err, `unknown "leaky"`)
}

func ExampleNew() {
	store, _ := memstore.New()
	l, _ := algorithms.New("slidingcounter", store)
	d, _ := l.AllowN(context.Background(), "k", sluice.PerMinute(2), 1)
	fmt.Println(d.Allowed, d.Remaining)
	// Output: true 1
}
