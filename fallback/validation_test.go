package fallback_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/store/memstore"
)

// downStore is a store whose every call fails, as an unreachable Redis.
type downStore struct{}

func (downStore) Run(context.Context, *sluice.Script, []string, []int64) ([]int64, error) {
	return nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
}

// TestBadInputIsAnErrorWhateverTheBreaker: with the store down and the
// breaker open, every policy still refuses what the wrapped algorithm
// refuses, by its own rules (issue 15, item 2).
func TestBadInputIsAnErrorWhateverTheBreaker(t *testing.T) {
	tb, err := tokenbucket.New(downStore{})
	require.NoError(t, err)
	sl, err := slidinglog.New(downStore{})
	require.NoError(t, err)
	localTB, err := tokenbucket.New(memstore.New())
	require.NoError(t, err)
	local, err := fallback.Local(localTB, func() int { return 3 })
	require.NoError(t, err)
	limit := sluice.PerSecond(10).WithBurst(20)
	for _, p := range []struct {
		name   string
		policy fallback.Policy
	}{{"open", fallback.Open()}, {"closed", fallback.Closed()}, {"local", local}} {
		for _, alg := range []struct {
			name string
			next sluice.Limiter
			bad  sluice.Limit // a limit the algorithm refuses
		}{{"tokenbucket", tb, sluice.PerSecond(600_000)}, {"slidinglog", sl, sluice.PerSecond(20_000)}} {
			t.Run(p.name+"/"+alg.name, func(t *testing.T) {
				l, err := fallback.New(alg.next, fallback.WithPolicy(p.policy), fallback.WithBreaker(1, time.Minute, 1))
				require.NoError(t, err)
				_, err = l.AllowN(t.Context(), "k", limit, 1)
				require.NoError(t, err, "the policy decides a good request")
				require.Equal(t, fallback.BreakerOpen, l.State())
				for _, c := range []struct {
					name  string
					limit sluice.Limit
					n     int64
					want  error
				}{
					{"cost -1", limit, -1, sluice.ErrInvalidCost},
					{"cost MinInt64", limit, math.MinInt64, sluice.ErrInvalidCost},
					{"cost above capacity", limit, 21, sluice.ErrCostExceedsBurst},
					{"cost MaxInt64", limit, math.MaxInt64, sluice.ErrCostExceedsBurst},
					{"a limit the algorithm refuses", alg.bad, 1, sluice.ErrInvalidLimit},
				} {
					_, err := l.AllowN(t.Context(), "k", c.limit, c.n)
					require.ErrorIs(t, err, c.want, c.name)
				}
			})
		}
	}
}
