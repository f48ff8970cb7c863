package sluicetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestANilContextIsAnError: every method that takes a context returns
// sluice.ErrNilContext for a nil one, on every store, algorithm and
// decorator, and never panics; a store given one still serves the next
// call (a nil context used to wedge a rueidis connection for good).
func TestANilContextIsAnError(t *testing.T) {
	server := redistest.SharedRedis(t)
	tiers := []sluicetest.Tier{sluicetest.MemTier(t), redistest.MiniredisTier(t),
		redistest.GoRedisTier(t, server), redistest.RueidisTier(t, server)}
	var nilCtx context.Context // what a caller passes by mistake
	limit := sluice.PerSecond(10).WithBurst(20)
	for _, tier := range tiers {
		t.Run(tier.Name, func(t *testing.T) {
			_, err := tier.Store.Run(nilCtx, tokenbucket.Script(), []string{"k"}, []int64{10, 1000000, 20, 1})
			require.ErrorIs(t, err, sluice.ErrNilContext, "the store")
			for _, alg := range builtins.Algorithms {
				base, err := alg.New(tier.Store, nil)
				require.NoError(t, err)
				stacks := [][]string{{}}
				for _, d := range builtins.Decorators {
					stacks = append(stacks, []string{d.Name})
				}
				for _, stack := range stacks {
					l, closeStack, err := builtins.Stack(base, stack...)
					if err != nil {
						continue // lease over a window algorithm: refused when built
					}
					name := alg.Name + "/" + stackNameOf(stack)
					_, err = l.AllowN(nilCtx, "k", limit, 1)
					require.ErrorIs(t, err, sluice.ErrNilContext, "%s: AllowN", name)
					if r, ok := l.(sluice.Refunder); ok {
						_, err = r.Refund(nilCtx, "k", limit, 1)
						require.ErrorIs(t, err, sluice.ErrNilContext, "%s: Refund", name)
					}
					if r, ok := l.(sluice.Resetter); ok {
						require.ErrorIs(t, r.Reset(nilCtx, "k"), sluice.ErrNilContext, "%s: Reset", name)
					}
					if b, ok := l.(sluice.BatchLimiter); ok {
						_, err = b.AllowBatch(nilCtx, []sluice.Request{{Key: "k", Limit: limit, N: 1}})
						require.ErrorIs(t, err, sluice.ErrNilContext, "%s: AllowBatch", name)
					}
					if le, ok := l.(ext.Leaser); ok {
						_, err = le.Lease(nilCtx, ext.LeaseRequest{Key: "k", Limit: limit, Holder: 1, Cost: 1, Hold: time.Second})
						require.ErrorIs(t, err, sluice.ErrNilContext, "%s: Lease", name)
						_, err = le.Release(nilCtx, "k", limit, 1, 0)
						require.ErrorIs(t, err, sluice.ErrNilContext, "%s: Release", name)
					}
					require.NoError(t, closeStack())
				}
			}
			ml, err := multilimit.New(tier.Store)
			require.NoError(t, err)
			_, err = ml.AllowN(nilCtx, []multilimit.Check{{Key: "k", Limit: limit, Algorithm: multilimit.TokenBucket}}, 1)
			require.ErrorIs(t, err, sluice.ErrNilContext, "multilimit")

			// The store still serves a call with a short deadline.
			tb, err := tokenbucket.New(tier.Store)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			d, err := tb.AllowN(ctx, sluice.Key(sluicetest.UniqueKey(t)), limit, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
		})
	}
}

func stackNameOf(stack []string) string {
	if len(stack) == 0 {
		return "bare"
	}
	return stack[0]
}
