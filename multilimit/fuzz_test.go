package multilimit_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// FuzzScriptMatchesModel: random sequences of multi-limit calls (1 to 3
// limits of any algorithms from a table, costs, time steps forwards and
// backwards) through the Lua scripts on a real redis-server (the one-pass
// script when every limit is a token bucket or GCRA, else the two-pass
// one) and through their Go models; every decision must be identical.
// Each 6 bytes of input are one call.
//
//	go test -run '^$' -fuzz FuzzScriptMatchesModel ./multilimit/
func FuzzScriptMatchesModel(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 1, 2, 2, 9, 0, 0, 3, 7, 3, 255, 255, 1, 0})
	f.Add([]byte("a seed long enough to make a dozen calls of mixed shapes"))
	server := redistest.SharedRedis(f)
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	f.Cleanup(func() { _ = client.Close() })
	table := []struct {
		limit     sluice.Limit
		algorithm multilimit.Algorithm
	}{
		{sluice.Limit{Rate: 5, Period: time.Second, Burst: 5}, multilimit.TokenBucket},
		{sluice.Limit{Rate: 8, Period: time.Minute, Burst: 8}, multilimit.GCRA},
		{sluice.Limit{Rate: 3, Period: time.Second, Burst: 7}, multilimit.TokenBucket},
		{sluice.Limit{Rate: 1000, Period: time.Second, Burst: 10}, multilimit.GCRA},
		{sluice.Limit{Rate: 6, Period: time.Second, Burst: 6}, multilimit.FixedWindow},
		{sluice.Limit{Rate: 9, Period: 2 * time.Second, Burst: 9}, multilimit.SlidingCounter},
		{sluice.Limit{Rate: 4, Period: 500 * time.Millisecond, Burst: 4}, multilimit.SlidingLog},
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clock := sluicetest.NewFakeClock(sluicetest.Epoch)
		store, err := goredisstore.New(client)
		require.NoError(t, err)
		script, err := multilimit.New(store, multilimit.WithClock(clock))
		require.NoError(t, err)
		model, err := multilimit.New(newMemStore(t), multilimit.WithClock(clock))
		require.NoError(t, err)
		tenant := sluicetest.UniqueKey(t)
		for i := 0; i+6 <= len(ops) && i < 6*150; i += 6 {
			m := 1 + int(ops[i])%3
			cs := make([]multilimit.Check, m)
			capacity := int64(1 << 40)
			for j := range cs {
				row := table[(int(ops[i+1])+j*int(1+ops[i+1]/16))%len(table)]
				cs[j] = multilimit.Check{Key: sluice.Key(tenant, string(rune('a'+j))), Limit: row.limit, Algorithm: row.algorithm}
				if row.algorithm == multilimit.TokenBucket || row.algorithm == multilimit.GCRA {
					capacity = min(capacity, row.limit.Burst)
				} else {
					capacity = min(capacity, row.limit.Rate)
				}
			}
			n := int64(ops[i+2]) % (capacity + 1)
			step := int64(int16(binary.LittleEndian.Uint16(ops[i+3:])))
			clock.Advance(time.Duration(step) * time.Duration(1+int(ops[i+5])%50) * time.Millisecond)
			got, gotErr := script.AllowN(t.Context(), cs, n)
			want, wantErr := model.AllowN(t.Context(), cs, n)
			require.Equal(t, wantErr == nil, gotErr == nil, "call %d: %v / %v", i/6, wantErr, gotErr)
			require.Equal(t, want, got, "call %d", i/6)
		}
	})
}
