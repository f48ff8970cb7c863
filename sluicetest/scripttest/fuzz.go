// Package scripttest holds an algorithm's Lua script to its Go twin: a
// differential fuzz test that runs both on random calls and requires
// identical decisions. It needs a redis-server on the PATH (see redistest).
package scripttest

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/memstore"
)

// FuzzScriptMatchesModel is the differential fuzz test of one algorithm,
// built-in or not:
// a random sequence of time steps (forwards and backwards), limits, costs,
// refunds and resets runs through the Lua script on a real redis-server
// (the package's shared one) and through the Go model, and every decision
// must be identical. Each 8 bytes of input are one call. The package's
// TestMain must call redistest.Main (or builtins.Main). An algorithm's
// package calls it from a Fuzz function:
//
//	func FuzzScriptMatchesModel(f *testing.F) { scripttest.FuzzScriptMatchesModel(f, myAlgorithm) }
func FuzzScriptMatchesModel(f *testing.F, alg sluicetest.Algorithm) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 5, 255, 255, 255, 0, 0, 0, 2, 0, 1, 2, 3, 4, 5, 6, 3, 9, 128, 0, 0, 0, 0, 0})
	f.Add([]byte{4, 255, 0, 0, 16, 0, 0, 1, 4, 255, 0, 0, 16, 0, 0, 1, 5, 3, 7, 7, 7, 7, 7, 128})
	f.Add([]byte{2, 200, 1, 0, 0, 0, 9, 2, 2, 7, 1, 0, 0, 0, 9, 6, 2, 1, 1, 0, 0, 0, 9, 4})
	f.Add([]byte("a longer seed that mixes every limit and cost in the table above!!"))

	server := redistest.SharedRedis(f)
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	f.Cleanup(func() { _ = client.Close() })
	limits := append([]sluice.Limit{
		{Rate: 1, Period: time.Hour, Burst: 1},
		{Rate: 5, Period: 366 * 24 * time.Hour, Burst: 50},
		{Rate: 1000, Period: time.Millisecond, Burst: 2},
	}, alg.Limits...)
	f.Fuzz(func(t *testing.T, ops []byte) {
		clock := sluicetest.NewFakeClock(sluicetest.Epoch)
		store, err := goredisstore.New(client)
		require.NoError(t, err)
		script, err := alg.New(store, clock)
		require.NoError(t, err)
		mem, err := memstore.New()
		require.NoError(t, err)
		model, err := alg.New(mem, clock)
		require.NoError(t, err)
		key := sluice.Key(sluicetest.UniqueKey(t))
		for i := 0; i+8 <= len(ops) && i < 8*200; i += 8 {
			limit := limits[int(ops[i])%len(limits)]
			capacity := alg.Capacity(limit)
			// A signed step of up to about ±1.6 days, biased towards short ones.
			step := int64(int32(binary.LittleEndian.Uint32(ops[i+2:])))
			step >>= ops[i+6] % 32
			clock.Advance(time.Duration(step) * 64 * time.Microsecond)
			k := key
			if ops[i+7]&1 == 1 {
				k += ":b"
			}
			var got, want sluice.Decision
			var gotErr, wantErr error
			switch op := ops[i+7] >> 1 % 16; {
			case op == 0:
				gotErr, wantErr = script.Reset(t.Context(), k), model.Reset(t.Context(), k)
			case op <= 2:
				n := 1 + int64(ops[i+1])%capacity
				got, gotErr = script.Refund(t.Context(), k, limit, n)
				want, wantErr = model.Refund(t.Context(), k, limit, n)
			default:
				n := int64(ops[i+1]) % (capacity + 1)
				got, gotErr = script.AllowN(t.Context(), k, limit, n)
				want, wantErr = model.AllowN(t.Context(), k, limit, n)
			}
			require.Equal(t, wantErr == nil, gotErr == nil, "call %d: errors %v / %v", i/8, wantErr, gotErr)
			require.Equal(t, want, got, "call %d at %s", i/8, clock.Now())
		}
	})
}
