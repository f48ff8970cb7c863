package tokenbucket_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/ext/algorithm"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// scriptServers returns a client and a store for Redis and for the
// embedded store, which both run the scripts.
func scriptServers(t *testing.T) map[string]*redis.Client {
	t.Helper()
	server := redistest.SharedRedis(t)
	onRedis := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	emb, err := embedded.Start()
	require.NoError(t, err)
	onEmbedded := redis.NewClient(&redis.Options{Addr: emb.Addr(), MaxRetries: -1})
	t.Cleanup(func() {
		_ = onRedis.Close()
		_ = onEmbedded.Close()
		_ = emb.Close()
	})
	return map[string]*redis.Client{"redis": onRedis, "embedded": onEmbedded}
}

// expiryOf returns when key expires, in Unix milliseconds of the server's
// clock, within the few milliseconds between the two reads.
func expiryOf(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	ttl, err := c.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0), "%s has an expiry", key)
	now, err := c.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMilli() + ttl.Milliseconds()
}

// stateOf returns key's state, which must be stored as "0x" and 14 hex
// digits, with a trailing space when its expiry is on the 32-second grid
// (steady), and the least expiry the scripts give that state: the whole
// second after it, plus a second, in Unix milliseconds.
func stateOf(t *testing.T, c *redis.Client, key string) (state, expiryMs int64, steady bool) {
	t.Helper()
	raw, err := c.Get(context.Background(), key).Result()
	require.NoError(t, err)
	steady = strings.HasSuffix(raw, " ")
	digits := strings.TrimSuffix(raw, " ")
	require.Len(t, digits, 16, "%q: 0x and 14 hex digits, perhaps a space", raw)
	state, err = strconv.ParseInt(digits, 0, 64)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("0x%014x", state), digits)
	return state, (state-state%1_000_000)/1000 + 2000, steady
}

// decide makes one decision on key through AllowN (path "single"), a
// batch of it and the same request on another key (path "keys", the
// batch of a key each) or a batch of it and a peek on the same key (path
// "hot", the batch of one key).
func decide(t *testing.T, l sluice.Limiter, path, key string, limit sluice.Limit, n int64) sluice.Decision {
	t.Helper()
	ctx := context.Background()
	if path == "single" {
		d, err := l.AllowN(ctx, key, limit, n)
		require.NoError(t, err)
		return d
	}
	other := sluice.Request{Key: key, Limit: limit, N: 0}
	if path == "keys" {
		other = sluice.Request{Key: key + ":other", Limit: limit, N: n} // one shape
	}
	results, err := l.(sluice.BatchLimiter).AllowBatch(ctx, []sluice.Request{{Key: key, Limit: limit, N: n}, other})
	require.NoError(t, err)
	require.NoError(t, results[0].Err)
	require.NoError(t, results[1].Err)
	return results[0].Decision
}

var statePaths = []string{"single", "hot", "keys"}

// forEachPath runs test for the token bucket and GCRA, on Redis and the
// embedded store, through each of statePaths, with a key of its own and
// that key's state key.
func forEachPath(t *testing.T, test func(t *testing.T, c *redis.Client, l sluice.Limiter, path, key, stateKey string)) {
	for server, c := range scriptServers(t) {
		store, err := goredisstore.New(c)
		require.NoError(t, err)
		for _, alg := range []string{"tokenbucket", "gcra"} {
			l, err := algorithms.New(alg, store)
			require.NoError(t, err)
			for _, path := range statePaths {
				t.Run(server+"/"+alg+"/"+path, func(t *testing.T) {
					key := "{st}:" + server + ":" + alg + ":" + path
					test(t, c, l, path, key, key+algorithm.Registered(alg).KeySuffix)
				})
			}
		}
	}
}

// TestStateTextReadsAnEarlierVersionsDecimal: a state an earlier version
// stored in decimal, with its own TTL, is read as that number by the
// decision script and both batch paths, on Redis and the embedded store,
// and its first write stores hex with the expiry the state gives, not
// the TTL found.
func TestStateTextReadsAnEarlierVersionsDecimal(t *testing.T) {
	ctx := context.Background()
	forEachPath(t, func(t *testing.T, c *redis.Client, l sluice.Limiter, path, key, stateKey string) {
		// Five a second, burst 5: 600 ms of deficit is three of the five
		// tokens used.
		limit := sluice.Limit{Rate: 5, Period: time.Second, Burst: 5}
		now, err := c.Time(ctx).Result()
		require.NoError(t, err)
		tat := now.UnixMicro() + 600_000
		require.NoError(t, c.Set(ctx, stateKey, strconv.FormatInt(tat, 10), 50*time.Second).Err())

		d := decide(t, l, path, key, limit, 3)
		require.False(t, d.Allowed, "two tokens left, not three")
		d = decide(t, l, path, key, limit, 2)
		require.True(t, d.Allowed, "two tokens left")
		state, expiry, steady := stateOf(t, c, stateKey)
		require.False(t, steady, "an earlier version's state: the second's grid")
		require.Equal(t, tat+400_000, state, "two tokens more on the decimal state read")
		require.InDelta(t, expiry, expiryOf(t, c, stateKey), 250, "the state's expiry, not the 50 s found")
	})
}

// TestStateTextKeepsALaterExpiry: a write whose state expires no later
// than the key does keeps the key's expiry (SETRANGE), on every path, on
// Redis and the embedded store.
func TestStateTextKeepsALaterExpiry(t *testing.T) {
	ctx := context.Background()
	forEachPath(t, func(t *testing.T, c *redis.Client, l sluice.Limiter, path, key, stateKey string) {
		// A microsecond a request: the state's second stays while the test
		// runs (it is well under 10 s), so the expiry set 10 s later stays
		// too.
		fine := sluice.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000_000}
		require.True(t, decide(t, l, path, key, fine, 1).Allowed)
		_, first, _ := stateOf(t, c, stateKey)
		require.InDelta(t, first, expiryOf(t, c, stateKey), 250, "a new key: the state's expiry")
		later := first + 10_000
		require.NoError(t, c.PExpireAt(ctx, stateKey, time.UnixMilli(later)).Err())
		require.True(t, decide(t, l, path, key, fine, 1).Allowed)
		_, own, _ := stateOf(t, c, stateKey)
		require.LessOrEqual(t, own, first+1000)
		require.InDelta(t, later, expiryOf(t, c, stateKey), 250, "the later expiry kept")
	})
}

// TestStateTextMovesASteadyKeysExpiryOnA32SecondGrid: a key written once
// expires on the second's grid; a key whose state moves past its expiry
// (written again in a later second) gets an expiry on a 32-second grid,
// 1 to 33 s after its state's, so that a steady key sets a new expiry
// about once in 32 seconds of its state, on every path, on Redis and the
// embedded store.
func TestStateTextMovesASteadyKeysExpiryOnA32SecondGrid(t *testing.T) {
	forEachPath(t, func(t *testing.T, c *redis.Client, l sluice.Limiter, path, key, stateKey string) {
		// A second a request: every write moves the state a second on.
		coarse := sluice.Limit{Rate: 1, Period: time.Second, Burst: 100_000_000}
		stateKey = strings.Replace(stateKey, key, key+":coarse", 1)
		key += ":coarse" // not the other tests' key
		require.True(t, decide(t, l, path, key, coarse, 1).Allowed)
		_, least, steady := stateOf(t, c, stateKey)
		require.False(t, steady, "a new key: the second's grid")
		require.InDelta(t, least, expiryOf(t, c, stateKey), 250, "a new key: the state's expiry")

		seconds := map[int64]bool{}
		for i := range 20 {
			require.True(t, decide(t, l, path, key, coarse, 1).Allowed)
			_, least, steady = stateOf(t, c, stateKey)
			require.True(t, steady, "write %d: written before, in an earlier second", i)
			got := expiryOf(t, c, stateKey)
			require.GreaterOrEqual(t, got, least-250, "write %d: never before the state's expiry", i)
			require.LessOrEqual(t, got, least+32_000+250, "write %d: at most 32 s after it", i)
			seconds[(got+500)/1000] = true
		}
		// Twenty seconds of state cross the 32-second grid at most once
		// after the first move: one expiry a second would be twenty.
		require.LessOrEqual(t, len(seconds), 2, "expiries set: %v", seconds)

		// The one-pass multi-limit script (two checks) reads the steady
		// text as the same state and writes it back steady.
		before, _, _ := stateOf(t, c, stateKey)
		store, err := goredisstore.New(c)
		require.NoError(t, err)
		ml, err := multilimit.New(store)
		require.NoError(t, err)
		alg := multilimit.TokenBucket
		if strings.HasSuffix(stateKey, ":gcra") {
			alg = multilimit.GCRA
		}
		d, err := ml.AllowN(context.Background(), []multilimit.Check{
			{Key: key, Limit: coarse, Algorithm: alg},
			{Key: key + ":second", Limit: coarse, Algorithm: alg},
		}, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		after, least, steady := stateOf(t, c, stateKey)
		require.Equal(t, before+1_000_000, after, "a second more on the steady state read")
		require.True(t, steady, "still steady")
		got := expiryOf(t, c, stateKey)
		require.GreaterOrEqual(t, got, least-250)
		require.LessOrEqual(t, got, least+32_000+250)

		// A write on the caller's clock sets a fresh expiry on the
		// second's grid and drops the space: no script then trusts a
		// 32-second grid that no write set.
		clocked, err := algorithm.New(algorithm.Registered(string(alg)), store, algorithm.WithClock(sluice.SystemClock{}))
		require.NoError(t, err)
		d2, err := clocked.AllowN(context.Background(), key, coarse, 1)
		require.NoError(t, err)
		require.True(t, d2.Allowed)
		_, least, steady = stateOf(t, c, stateKey)
		require.False(t, steady, "the caller's clock: the second's grid")
		require.InDelta(t, least, expiryOf(t, c, stateKey), 250, "the state's own expiry")
	})
}

// TestStateTextIsReadByAnEarlierVersion: the read of a state before this
// version, tonumber without a base, takes the hex state (with or without
// the steady key's trailing space) for its number
// on Redis and the embedded store, so a rolling upgrade decides alike on
// both sides.
func TestStateTextIsReadByAnEarlierVersion(t *testing.T) {
	const state = 1_767_225_600_523_457
	for _, text := range []string{fmt.Sprintf("0x%014x", state), fmt.Sprintf("0x%014x ", state)} {
		for server, c := range scriptServers(t) {
			got, err := c.Eval(context.Background(), "return tonumber(ARGV[1])", []string{"{st}:any"}, text).Int64()
			require.NoError(t, err, server)
			require.Equal(t, int64(state), got, "%s: %q", server, text)
		}
	}
}
