package tokenbucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// TestHexArgumentsDecideAsDecimal: every algorithm decides the same
// requests, refunds and batches alike whether its arguments go in hex
// (Sluice's stores, sluice.Script.Arg) or in decimal (any other store),
// on Redis and the embedded store, on twin keys at the same instants.
func TestHexArgumentsDecideAsDecimal(t *testing.T) {
	ctx := context.Background()
	for server, c := range scriptServers(t) {
		hexStore, err := goredisstore.New(c)
		require.NoError(t, err)
		for _, alg := range builtins.Algorithms {
			t.Run(server+"/"+alg.Name, func(t *testing.T) {
				require.Equal(t, "0x1f", alg.Script.Arg(31), "the decision script takes hex")
				require.Equal(t, "-31", alg.Script.Arg(-31), "a negative number in decimal")
				clock := sluicetest.NewFakeClock(sluicetest.Epoch)
				inHex, err := alg.New(hexStore, clock)
				require.NoError(t, err)
				inDecimal, err := alg.New(redistest.DecimalStore(c), clock)
				require.NoError(t, err)
				key := "{hex}:" + server + ":" + alg.Name
				limit := sluice.Limit{Rate: 10, Period: time.Second, Burst: 10}
				for i, n := range []int64{1, 3, 0, 4, 2, 5, 1} {
					a, err := inHex.AllowN(ctx, key+":h", limit, n)
					require.NoError(t, err)
					b, err := inDecimal.AllowN(ctx, key+":d", limit, n)
					require.NoError(t, err)
					require.Equal(t, b, a, "decision %d", i)
					if i == 3 {
						a, err = inHex.Refund(ctx, key+":h", limit, 10) // "-10" read as hex would be -16
						require.NoError(t, err)
						b, err = inDecimal.Refund(ctx, key+":d", limit, 10)
						require.NoError(t, err)
						require.Equal(t, b, a, "the refund")
					}
					// Batches of each path: two shapes on two keys, one shape
					// on a key each, one shape on one key.
					for _, keys := range [][]string{{"b1", "b2", "b1"}, {"b3", "b4"}, {"b5", "b5"}} {
						reqs := func(suffix string) []sluice.Request {
							out := make([]sluice.Request, len(keys))
							for j, k := range keys {
								out[j] = sluice.Request{Key: key + suffix + ":" + k, Limit: limit, N: n}
							}
							if len(keys) == 3 {
								out[2].N = 1
							}
							return out
						}
						ra, err := inHex.AllowBatch(ctx, reqs(":h"))
						require.NoError(t, err)
						rb, err := inDecimal.AllowBatch(ctx, reqs(":d"))
						require.NoError(t, err)
						require.Equal(t, rb, ra, "batch %d on %v", i, keys)
					}
					clock.Advance(150 * time.Millisecond)
				}
			})
		}
	}
}
