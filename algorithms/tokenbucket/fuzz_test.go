package tokenbucket_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/memstore"
)

// FuzzScriptMatchesModel is the differential fuzz test: a random sequence
// of time steps (forwards and backwards), costs and limits is run through
// the Lua script on a real redis-server and through the Go model, and every
// decision must be identical. Each 8 bytes of input are one call.
//
//	go test -run '^$' -fuzz FuzzScriptMatchesModel ./algorithms/tokenbucket/
func FuzzScriptMatchesModel(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 5, 255, 255, 255, 0, 0, 0, 2, 0, 1, 2, 3, 4, 5, 6, 3, 9, 128, 0, 0, 0, 0, 0})
	f.Add([]byte{4, 255, 0, 0, 16, 0, 0, 1, 4, 255, 0, 0, 16, 0, 0, 1, 5, 3, 7, 7, 7, 7, 7, 128})
	f.Add([]byte("a longer seed that mixes every limit and cost in the table above!!"))

	server := sluicetest.SharedRedis(f)
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	f.Cleanup(func() { _ = client.Close() })
	limits := []sluice.Limit{
		{Rate: 10, Period: time.Second, Burst: 5},
		{Rate: 3, Period: time.Second, Burst: 7},
		{Rate: 1, Period: time.Hour, Burst: 1},
		{Rate: 1000, Period: time.Second, Burst: 1000},
		{Rate: 7, Period: 13 * time.Millisecond, Burst: 3},
		{Rate: 1_000_000, Period: time.Second, Burst: 1},
		{Rate: 5, Period: 366 * 24 * time.Hour, Burst: 50},
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clock := sluicetest.NewFakeClock(sluicetest.Epoch)
		script, err := tokenbucket.New(goredisstore.New(client), tokenbucket.WithClock(clock))
		require.NoError(t, err)
		model, err := tokenbucket.New(memstore.New(), tokenbucket.WithClock(clock))
		require.NoError(t, err)
		key := sluice.Key(sluicetest.UniqueKey(t))
		for i := 0; i+8 <= len(ops) && i < 8*200; i += 8 {
			limit := limits[int(ops[i])%len(limits)]
			n := int64(ops[i+1]) % (limit.Burst + 1)
			// A signed step of up to ~±1.5 days, biased towards short ones.
			step := int64(int32(binary.LittleEndian.Uint32(ops[i+2:])))
			step >>= ops[i+6] % 32
			clock.Advance(time.Duration(step) * 64 * time.Microsecond)
			k := key
			if ops[i+7]&1 == 1 {
				k += ":b"
			}
			got, gotErr := script.AllowN(t.Context(), k, limit, n)
			want, wantErr := model.AllowN(t.Context(), k, limit, n)
			require.Equal(t, wantErr == nil, gotErr == nil, "call %d: errors %v / %v", i/8, wantErr, gotErr)
			require.Equal(t, want, got, "call %d at %s", i/8, clock.Now())
		}
	})
}
