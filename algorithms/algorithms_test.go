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

// TestNewKnowsEveryName: each name builds a limiter that decides; an
// unknown one is an error naming the known ones.
func TestNewKnowsEveryName(t *testing.T) {
	for _, name := range append([]string{""}, algorithms.Names...) {
		l, err := algorithms.New(name, memstore.New())
		require.NoError(t, err, name)
		d, err := l.AllowN(t.Context(), "k", sluice.PerSecond(1), 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	_, err := algorithms.New("leaky", memstore.New())
	require.ErrorContains(t, err, `unknown "leaky"`)
}

func ExampleNew() {
	l, _ := algorithms.New("slidingcounter", memstore.New())
	d, _ := l.AllowN(context.Background(), "k", sluice.PerMinute(2), 1)
	fmt.Println(d.Allowed, d.Remaining)
	// Output: true 1
}
