package multilimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestABadStateFailsTheWholeCall: a limit whose key holds another type
// (a hash: MGET reads it as missing, GET raises WRONGTYPE) or a string
// that is no state fails the call with ErrKeyConflict, and no limit is
// written, whichever script decides it (the one-pass script for token
// buckets and GCRAs, the two-pass one with a fixed window), the bad key
// first or last.
func TestABadStateFailsTheWholeCall(t *testing.T) {
	spoil := map[string]*sluice.Script{
		"a hash":         sluice.NewScript("redis.call('HSET', KEYS[1], 'f', '1') return {1}", nil),
		"not a state":    sluice.NewScript("redis.call('SET', KEYS[1], 'abc') return {1}", nil),
		"a negative one": sluice.NewScript("redis.call('SET', KEYS[1], '-5') return {1}", nil),
	}
	for _, tier := range []sluicetest.Tier{redistest.MiniredisTier(t), redistest.GoRedisTier(t, redistest.SharedRedis(t)),
		redistest.DecimalTier(t, redistest.SharedRedis(t))} {
		ml, err := multilimit.New(tier.Store)
		require.NoError(t, err)
		limit := sluice.Limit{Rate: 10, Period: time.Second, Burst: 10}
		for what, script := range spoil {
			if what == "a hash" && tier.Name == "miniredis" {
				continue // miniredis turns an error raised in a script into its own, "ERR Error compiling script"
			}
			for _, other := range []multilimit.Algorithm{multilimit.GCRA, multilimit.FixedWindow} {
				for _, badFirst := range []bool{true, false} {
					tenant := sluicetest.UniqueKey(t)
					bad := multilimit.Check{Key: sluice.Key(tenant, "bad"), Limit: limit, Algorithm: multilimit.TokenBucket}
					good := multilimit.Check{Key: sluice.Key(tenant, "good"), Limit: limit, Algorithm: other}
					checks := []multilimit.Check{good, bad}
					if badFirst {
						checks = []multilimit.Check{bad, good}
					}
					_, err := tier.Store.Run(t.Context(), script, []string{bad.Key + ":tb"}, nil)
					require.NoError(t, err)
					_, err = ml.AllowN(t.Context(), checks, 1)
					require.ErrorIs(t, err, sluice.ErrKeyConflict, "%s: %s with %s", tier.Name, what, other)
					for _, suffix := range []string{":gcra", ":fw"} {
						_, found, err := tier.Get(t.Context(), good.Key+suffix)
						require.NoError(t, err)
						require.False(t, found, "%s: %s with %s: nothing written", tier.Name, what, other)
					}
				}
			}
		}
	}
}
