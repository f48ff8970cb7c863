package tokenbucket_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// TestEveryArgumentEncodingDecidesAlike: every algorithm decides the same
// requests, refunds and batches alike whether its arguments go packed
// into one (Sluice's stores, sluice.Script.Args), one per number in hex
// (sluice.Script.Arg, a store written before Args) or in decimal (any
// other store), on Redis (which unpacks with struct.unpack) and the
// embedded store (whose Lua has no struct library), on triplet keys at
// the same instants.
func TestEveryArgumentEncodingDecidesAlike(t *testing.T) {
	ctx := context.Background()
	for server, c := range scriptServers(t) {
		packedStore, err := goredisstore.New(c)
		require.NoError(t, err)
		stores := []struct {
			suffix string
			store  sluice.Store
		}{{":p", packedStore}, {":h", redistest.HexStore(c)}, {":d", redistest.DecimalStore(c)}}
		for _, alg := range builtins.Algorithms {
			t.Run(server+"/"+alg.Name, func(t *testing.T) {
				require.Equal(t, "0x1f", alg.Script.Arg(31), "the decision script takes hex")
				require.Equal(t, "-31", alg.Script.Arg(-31), "a negative number in decimal")
				require.Len(t, alg.Script.Args([]int64{1, 2, 3, -4}), 1, "and its numbers packed into one argument")
				clock := sluicetest.NewFakeClock(sluicetest.Epoch)
				limiters := make([]sluice.Limiter, len(stores))
				for i, s := range stores {
					limiters[i], err = alg.New(s.store, clock)
					require.NoError(t, err)
				}
				key := "{args}:" + server + ":" + alg.Name
				limit := sluice.Limit{Rate: 30, Period: 3 * time.Second, Burst: 30}
				// each calls call on every store's limiter, on the store's own
				// keys, and requires the replies of all three to be equal.
				each := func(what string, call func(l sluice.Limiter, suffix string) (any, error)) {
					t.Helper()
					var first any
					for i, s := range stores {
						got, err := call(limiters[i], s.suffix)
						require.NoError(t, err, "%s, %s", what, s.suffix)
						if i == 0 {
							first = got
						} else {
							require.Equal(t, first, got, "%s: %s differs from packed", what, s.suffix)
						}
					}
				}
				for i, n := range []int64{5, 7, 0, 6, 2, 5, 1} {
					each("decision", func(l sluice.Limiter, suffix string) (any, error) {
						return l.AllowN(ctx, key+suffix, limit, n)
					})
					if i == 3 {
						each("refund", func(l sluice.Limiter, suffix string) (any, error) {
							// 18 taken: "-11" read as hex would be -17; packed, it
							// is 7 bytes of two's complement.
							return l.(sluice.Refunder).Refund(ctx, key+suffix, limit, 11)
						})
					}
					// Batches of each path: two shapes on two keys, one shape
					// on a key each, one shape on one key.
					for _, keys := range [][]string{{"b1", "b2", "b1"}, {"b3", "b4"}, {"b5", "b5"}} {
						each("batch", func(l sluice.Limiter, suffix string) (any, error) {
							reqs := make([]sluice.Request, len(keys))
							for j, k := range keys {
								reqs[j] = sluice.Request{Key: key + suffix + ":" + k, Limit: limit, N: n}
							}
							if len(keys) == 3 {
								reqs[2].N = 1
							}
							return l.(sluice.BatchLimiter).AllowBatch(ctx, reqs)
						})
					}
					clock.Advance(150 * time.Millisecond)
				}
			})
		}
	}
}

// TestADecisionReadsEachNumbersOwnPrefix: sent one per argument, each
// number of a decision is read as its own prefix says (0x: hex, else
// decimal), whatever the others', on Redis and the embedded store: every
// mix decides as all-decimal does, on twin keys at one instant.
func TestADecisionReadsEachNumbersOwnPrefix(t *testing.T) {
	now := fmt.Sprint(sluicetest.Epoch.UnixMicro())
	for server, c := range scriptServers(t) {
		for name, args := range map[string][]any{
			"hex rate, decimal rest": {"0xa", "1000000", "10", "3", now},
			"decimal rate, hex rest": {"10", "0xf4240", "0xa", "0x3", now},
			"hex, a decimal refund":  {"0xa", "0xf4240", "0xa", "-3", now},
			"all decimal, hex now":   {"10", "1000000", "10", "3", fmt.Sprintf("0x%x", sluicetest.Epoch.UnixMicro())},
		} {
			key := "{prefix}:" + server + ":" + name
			decimal := append([]any{"10", "1000000", "10"}, args[3].(string), now)
			if name == "hex, a decimal refund" {
				decimal[3] = "-3"
			}
			// Twice each: the second reply carries the state the first wrote.
			for i := range 2 {
				want, err := c.Eval(t.Context(), tokenbucket.Script().Source(), []string{key + ":d"}, decimal...).Int64()
				require.NoError(t, err, "%s/%s", server, name)
				got, err := c.Eval(t.Context(), tokenbucket.Script().Source(), []string{key + ":m"}, args...).Int64()
				require.NoError(t, err, "%s/%s", server, name)
				require.Equal(t, want, got, "%s/%s, call %d", server, name, i)
			}
		}
	}
}
