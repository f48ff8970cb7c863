package algorithm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/goredisstore"
)

func TestMain(m *testing.M) { builtins.Main(m) }

// leaser is a bucket algorithm's limiter: it decides and leases.
type leaser interface {
	sluice.Limiter
	ext.Leaser
}

func newLeasers(t *testing.T, store sluice.Store, clock sluice.Clock) map[string]leaser {
	tb, err := tokenbucket.New(store, tokenbucket.WithClock(clock))
	require.NoError(t, err)
	g, err := gcra.New(store, gcra.WithClock(clock))
	require.NoError(t, err)
	return map[string]leaser{"tokenbucket": tb, "gcra": g}
}

// tiers are the stores a lease script runs on: the Go twin, miniredis's
// Lua and a real redis-server's, sent hex and decimal arguments.
func tiers(t *testing.T) []sluicetest.Tier {
	return []sluicetest.Tier{sluicetest.MemTier(t), redistest.MiniredisTier(t),
		redistest.GoRedisTier(t, redistest.SharedRedis(t)), redistest.DecimalTier(t, redistest.SharedRedis(t))}
}

const hold = time.Second

var leaseLimit = sluice.Limit{Rate: 100, Period: time.Second, Burst: 100} // 10 ms a token

// TestLeasedTokensCountUntilReleased is the lease's core promise: tokens
// held by one holder keep the bucket from refilling into them, however
// long they are held, until the holder releases them.
func TestLeasedTokensCountUntilReleased(t *testing.T) {
	for _, tier := range tiers(t) {
		for _, name := range []string{"tokenbucket", "gcra"} {
			t.Run(tier.Name+"/"+name, func(t *testing.T) {
				clock := sluicetest.NewFakeClock(sluicetest.Epoch)
				l := newLeasers(t, tier.Store, clock)[name]
				key := sluice.Key(sluicetest.UniqueKey(t))
				ctx := t.Context()
				g, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 1, Cost: 1, Extra: 99, Hold: hold})
				require.NoError(t, err)
				require.True(t, g.Allowed)
				require.EqualValues(t, 24, g.Extra, "a quarter of the 99 left after the cost (the lease rule)")
				require.EqualValues(t, 24, g.Reserved)
				require.Equal(t, hold, g.Expires)
				require.EqualValues(t, 75, g.Remaining)

				// 0.9 s later the unleased bucket would be full; the
				// reservation of 24 leaves room for 76 at most.
				clock.Advance(900 * time.Millisecond)
				d, err := l.AllowN(ctx, key, leaseLimit, 0)
				require.NoError(t, err)
				other, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 2, Cost: 76, Hold: hold})
				require.NoError(t, err)
				require.True(t, other.Allowed, "76 tokens are free: burst 100 less 24 reserved")
				require.EqualValues(t, 0, other.Extra)
				require.True(t, d.Allowed, "a plain peek does not see reservations")
				denied, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 2, Cost: 1, Hold: hold})
				require.NoError(t, err)
				require.False(t, denied.Allowed, "the reservation leaves nothing")
				require.Greater(t, denied.RetryAfter, time.Duration(0))

				// Holder 1 spent 4 and releases the 20 it did not.
				rel, err := l.Release(ctx, key, leaseLimit, 1, 20)
				require.NoError(t, err)
				require.EqualValues(t, 20, rel.Remaining, "the unspent tokens are back, and nothing more")
				again, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 2, Cost: 1, Extra: 100, Hold: hold})
				require.NoError(t, err)
				require.True(t, again.Allowed)
				require.EqualValues(t, 4, again.Extra, "a quarter of the 19 left after the cost")
			})
		}
	}
}

// TestReportedSpendingStopsCounting: a holder that reports what it still
// holds frees the rest of its reservation, and the bucket refills into it
// from then on (not from when the tokens were spent, which the store does
// not know: a holder reports at its next lease or release).
func TestReportedSpendingStopsCounting(t *testing.T) {
	const hold = 5 * time.Second // longer than a full refill
	for _, tier := range tiers(t) {
		t.Run(tier.Name, func(t *testing.T) {
			clock := sluicetest.NewFakeClock(sluicetest.Epoch)
			l := newLeasers(t, tier.Store, clock)["tokenbucket"]
			key := sluice.Key(sluicetest.UniqueKey(t))
			ctx := t.Context()
			g, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 1, Cost: 1, Extra: 99, Hold: hold})
			require.NoError(t, err)
			require.EqualValues(t, 24, g.Extra)
			clock.Advance(500 * time.Millisecond)
			g, err = l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 2, Cost: 76, Hold: hold})
			require.NoError(t, err)
			require.True(t, g.Allowed, "the bucket less the 24 reserved")
			// Holder 1 spent 20 of its 24 and reports the 4 it holds; the
			// bucket is empty, so its refill is denied.
			g, err = l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 1, Extra: 1, Held: 4, Hold: hold})
			require.NoError(t, err)
			require.False(t, g.Allowed)
			require.EqualValues(t, 4, g.Reserved, "the report shrinks the reservation")
			require.Equal(t, 4500*time.Millisecond, g.Expires, "no tokens granted: the reservation keeps its end")
			clock.Advance(time.Second)
			peek, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 3, Hold: hold})
			require.NoError(t, err)
			require.EqualValues(t, 96, peek.Remaining, "a second later the bucket is full but for the 4 still reserved (76 had the 20 spent stayed reserved)")
			// Claiming to hold more than it reserves counts as what it reserves.
			g, err = l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 1, Cost: 1, Held: 1000, Hold: hold})
			require.NoError(t, err)
			require.True(t, g.Allowed)
			require.EqualValues(t, 4, g.Reserved)
			rel, err := l.Release(ctx, key, leaseLimit, 1, 1000)
			require.NoError(t, err)
			require.EqualValues(t, 99, rel.Remaining, "a release gives back at most the 4 reserved")
		})
	}
}

// TestAnExpiredReservationRefillsAtTheRate: a holder that dies leaves its
// reservation to expire; from then the bucket refills into it at the
// limit's rate, never at once.
func TestAnExpiredReservationRefillsAtTheRate(t *testing.T) {
	for _, tier := range tiers(t) {
		t.Run(tier.Name, func(t *testing.T) {
			clock := sluicetest.NewFakeClock(sluicetest.Epoch)
			l := newLeasers(t, tier.Store, clock)["tokenbucket"]
			key := sluice.Key(sluicetest.UniqueKey(t))
			ctx := t.Context()
			_, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 7, Cost: 100, Hold: hold})
			require.NoError(t, err)
			_, err = l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 7, Cost: 0, Extra: 0, Hold: hold})
			require.NoError(t, err)
			// Holder 7 reserves nothing (its cost was spent at once); holder 8
			// takes what refills in 0.5 s and dies.
			clock.Advance(500 * time.Millisecond)
			g, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 8, Cost: 1, Extra: 100, Hold: hold})
			require.NoError(t, err)
			require.EqualValues(t, 12, g.Extra, "a quarter of the 49 left after the cost")
			// While the 12 were reserved the bucket refilled to 88 at most;
			// 50 ms after the reservation ended, 5 more.
			clock.Advance(hold + 50*time.Millisecond)
			d, err := l.Lease(ctx, ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 9, Cost: 0, Hold: hold})
			require.NoError(t, err)
			require.EqualValues(t, 88+5, d.Remaining)
		})
	}
}

func TestLeaseRefusesBadRequests(t *testing.T) {
	l := newLeasers(t, sluicetest.MemTier(t).Store, sluicetest.NewFakeClock(sluicetest.Epoch))["gcra"]
	key := sluice.Key("bad")
	ok := ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 1, Cost: 1, Hold: hold}
	for name, mutate := range map[string]func(*ext.LeaseRequest){
		"holder 0":        func(r *ext.LeaseRequest) { r.Holder = 0 },
		"negative extra":  func(r *ext.LeaseRequest) { r.Extra = -1 },
		"negative held":   func(r *ext.LeaseRequest) { r.Held = -1 },
		"hold 0":          func(r *ext.LeaseRequest) { r.Hold = 0 },
		"hold 2h":         func(r *ext.LeaseRequest) { r.Hold = 2 * time.Hour },
		"hold 1.5 ms":     func(r *ext.LeaseRequest) { r.Hold = 1500 * time.Microsecond },
		"cost over burst": func(r *ext.LeaseRequest) { r.Cost = 101 },
		"negative cost":   func(r *ext.LeaseRequest) { r.Cost = -1 },
		"empty key":       func(r *ext.LeaseRequest) { r.Key = "" },
		"bad limit":       func(r *ext.LeaseRequest) { r.Limit.Rate = 0 },
	} {
		req := ok
		mutate(&req)
		_, err := l.Lease(t.Context(), req)
		require.Error(t, err, name)
	}
	_, err := l.Lease(t.Context(), ok)
	require.NoError(t, err)
	_, err = l.Release(t.Context(), key, leaseLimit, 0, 1)
	require.Error(t, err)
	_, err = l.Release(t.Context(), key, leaseLimit, 1, -1)
	require.Error(t, err)
}

func TestLedgerKeyKeepsTheSlot(t *testing.T) {
	for _, k := range []string{"rl:{tenant:42}:api:tb", "plain:tb", "{open:tb", "a{b}c", "rl:{%}:tb"} {
		require.Equal(t, ext.HashSlot(k), ext.HashSlot(algorithm.LedgerKey(k)), k)
		require.NotEqual(t, k, algorithm.LedgerKey(k))
	}
	// Without a hash tag and with a '}' no wrapping keeps the slot; the
	// ledger key is still distinct.
	require.Equal(t, "{}odd:tb:leases", algorithm.LedgerKey("{}odd:tb"))
}

// FuzzLeaseScriptMatchesModel runs random sequences of leases, reports,
// releases, plain decisions and time steps, by three holders, through the
// Lua script on a real redis-server and on miniredis and through the Go
// twin: every reply must be identical.
func FuzzLeaseScriptMatchesModel(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 4})
	f.Add([]byte{1, 5, 255, 255, 255, 0, 0, 0, 2, 0, 1, 2, 3, 4, 5, 6, 3, 9, 128, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 200, 1, 0, 0, 0, 9, 2, 2, 7, 1, 0, 0, 0, 9, 6, 2, 1, 1, 0, 0, 0, 9, 4})
	f.Add([]byte("a longer seed that mixes leases, releases and time steps of all kinds!!"))
	real := redistest.SharedRedis(f)
	limits := []sluice.Limit{
		leaseLimit,
		{Rate: 10, Period: time.Second, Burst: 50},
		{Rate: 1, Period: time.Hour, Burst: 3},
		{Rate: 1000, Period: time.Millisecond, Burst: 2},
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clock := sluicetest.NewFakeClock(sluicetest.Epoch)
		stores := []sluicetest.Tier{sluicetest.MemTier(t), redistest.MiniredisTier(t), redistest.GoRedisTier(t, real)}
		key := sluice.Key(sluicetest.UniqueKey(t))
		for _, name := range []string{"tokenbucket", "gcra"} {
			var ls []leaser
			for _, s := range stores {
				ls = append(ls, newLeasers(t, s.Store, clock)[name])
			}
			for i := 0; i+8 <= len(ops) && i < 8*150; i += 8 {
				limit := limits[int(ops[i])%len(limits)]
				step := int64(int32(binary.LittleEndian.Uint32(ops[i+2:])))
				step >>= ops[i+6] % 32
				clock.Advance(time.Duration(step) * 16 * time.Microsecond)
				holder := 1 + int64(ops[i+7]>>5)%3
				n := int64(ops[i+1])
				var replies []any
				var errs []error
				for _, l := range ls {
					var r any
					var err error
					switch op := ops[i+7] & 7; {
					case op == 0:
						r, err = l.Release(t.Context(), key, limit, holder, n%(limit.Burst+2))
					case op == 1:
						r, err = l.AllowN(t.Context(), key, limit, n%(limit.Burst+1))
					default:
						r, err = l.Lease(t.Context(), ext.LeaseRequest{Key: key, Limit: limit, Holder: holder,
							Cost: n % (limit.Burst + 1), Extra: int64(op) * 7 % (limit.Burst + 3), Held: n % 5,
							Hold: time.Duration(1+ops[i+6]%3) * 300 * time.Millisecond})
					}
					replies, errs = append(replies, r), append(errs, err)
				}
				for j := 1; j < len(ls); j++ {
					require.Equal(t, errs[0] == nil, errs[j] == nil, "%s call %d on %s: errors %v / %v", name, i/8, stores[j].Name, errs[0], errs[j])
					if errs[0] != nil {
						require.True(t, errors.Is(errs[j], sluice.ErrInvalidCost) == errors.Is(errs[0], sluice.ErrInvalidCost))
						continue
					}
					require.Equal(t, replies[0], replies[j], "%s call %d on %s at %s", name, i/8, stores[j].Name, clock.Now())
				}
			}
		}
	})
}

// batchLeaser leases in batches, as the bucket algorithms do.
type batchLeaser interface {
	leaser
	LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error)
}

// FuzzLeaseBatchMatchesSingles: a batch of lease requests on distinct keys,
// takes and releases mixed, answers each exactly as the request alone
// (Lease, or Release) would at the same instant, on the Go twin, miniredis
// and a real redis-server, and a bad request fails the whole batch before
// anything is sent.
func FuzzLeaseBatchMatchesSingles(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("batches of leases, refills and peeks over a few keys at once"))
	real := redistest.SharedRedis(f)
	limit := sluice.Limit{Rate: 10, Period: time.Second, Burst: 30}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clock := sluicetest.NewFakeClock(sluicetest.Epoch)
		for _, tier := range []sluicetest.Tier{sluicetest.MemTier(t), redistest.MiniredisTier(t), redistest.GoRedisTier(t, real)} {
			l := newLeasers(t, tier.Store, clock)["tokenbucket"].(batchLeaser)
			base := sluicetest.UniqueKey(t)
			for i := 0; i+4 <= len(ops) && i < 4*40; i += 4 {
				clock.Advance(time.Duration(ops[i]) * 3 * time.Millisecond)
				n := 1 + int(ops[i+1])%6
				var batch, singles []ext.LeaseRequest
				for j := range n {
					r := ext.LeaseRequest{Limit: limit, Holder: 1 + int64(ops[i+2]>>j&1),
						Cost: int64(ops[i+3]>>j) % 4, Extra: int64(ops[i+2]+byte(j)) % 12, Held: int64(j % 3), Hold: 200 * time.Millisecond}
					if (ops[i+2]+ops[i+3]+byte(j))%3 == 0 {
						r = ext.LeaseRequest{Limit: limit, Holder: r.Holder, Release: true, Unspent: int64(ops[i+3]+byte(j)) % 40}
					}
					r.Key = sluice.Key(base, "b", fmt.Sprint(j))
					batch = append(batch, r)
					r.Key = sluice.Key(base, "s", fmt.Sprint(j))
					singles = append(singles, r)
				}
				got, err := l.LeaseBatch(t.Context(), batch)
				require.NoError(t, err)
				for j, r := range singles {
					g, err := single(t.Context(), l, r)
					require.Equal(t, err == nil, got[j].Err == nil, "%s op %d request %d: %v / %v", tier.Name, i/4, j, err, got[j].Err)
					require.Equal(t, g, got[j].Grant, "%s op %d request %d", tier.Name, i/4, j)
				}
			}
			bad := []ext.LeaseRequest{{Key: sluice.Key(base, "x"), Limit: limit, Holder: 1, Hold: time.Second}, {Key: sluice.Key(base, "y"), Limit: limit, Holder: 0, Hold: time.Second}}
			_, err := l.LeaseBatch(t.Context(), bad)
			var reqErr *sluice.RequestError
			require.ErrorAs(t, err, &reqErr)
			require.Equal(t, 1, reqErr.Index)
		}
	})
}

// single runs r alone: a take by Lease, a release by Release (its Decision
// as a Grant, as a batch answers it).
func single(ctx context.Context, l leaser, r ext.LeaseRequest) (ext.Grant, error) {
	if r.Release {
		d, err := l.Release(ctx, r.Key, r.Limit, r.Holder, r.Unspent)
		return ext.Grant{Decision: d}, err
	}
	return l.Lease(ctx, r)
}

// TestALeaseBatchMixesTakesAndReleases: a batch of takes and releases of
// different keys decides each exactly as the single call (Lease or
// Release) would at the same instant, leaves the same state behind, and
// validates a release as Release does, on the Go twin and on miniredis
// (store/embedded).
func TestALeaseBatchMixesTakesAndReleases(t *testing.T) {
	for _, tier := range []sluicetest.Tier{sluicetest.MemTier(t), redistest.MiniredisTier(t)} {
		for _, name := range []string{"tokenbucket", "gcra"} {
			t.Run(tier.Name+"/"+name, func(t *testing.T) {
				clock := sluicetest.NewFakeClock(sluicetest.Epoch)
				l := newLeasers(t, tier.Store, clock)[name].(batchLeaser)
				ctx := t.Context()
				base := sluicetest.UniqueKey(t)
				keys := func(set string) []string {
					var ks []string
					for j := range 7 {
						ks = append(ks, sluice.Key(base, set, fmt.Sprint(j)))
					}
					return ks
				}
				batchKeys, singleKeys := keys("b"), keys("s")
				// The same history on both sets of keys: holder 1 leases
				// from every key but the last, holder 2 from the first two.
				for _, ks := range [][]string{batchKeys, singleKeys} {
					for j, k := range ks[:6] {
						_, err := l.Lease(ctx, ext.LeaseRequest{Key: k, Limit: leaseLimit, Holder: 1, Cost: 1, Extra: int64(10 * (j + 1)), Hold: hold})
						require.NoError(t, err)
						if j < 2 {
							_, err = l.Lease(ctx, ext.LeaseRequest{Key: k, Limit: leaseLimit, Holder: 2, Cost: 1, Extra: 15, Hold: hold})
							require.NoError(t, err)
						}
					}
				}
				clock.Advance(300 * time.Millisecond)
				reqs := []ext.LeaseRequest{
					{Limit: leaseLimit, Holder: 1, Release: true, Unspent: 4},                     // gives back 4 of 10
					{Limit: leaseLimit, Holder: 2, Cost: 2, Extra: 20, Held: 9, Hold: hold},       // a take beside holder 1's lease
					{Limit: leaseLimit, Holder: 1, Release: true, Unspent: 1000},                  // gives back at most its 30
					{Limit: leaseLimit, Holder: 1, Cost: 0, Hold: hold},                           // a peek
					{Limit: leaseLimit, Holder: 3, Release: true, Unspent: 5},                     // holds nothing: gives back nothing
					{Limit: leaseLimit, Holder: 1, Cost: 100, Held: 60, Hold: hold},               // denied
					{Limit: leaseLimit, Holder: 1, Release: true, Unspent: 0, Cost: -7, Hold: -1}, // nothing leased; Cost and Hold unused
				}
				batch := make([]ext.LeaseRequest, len(reqs))
				for j, r := range reqs {
					batch[j] = r
					batch[j].Key = batchKeys[j]
				}
				got, err := l.LeaseBatch(ctx, batch)
				require.NoError(t, err)
				require.Len(t, got, len(reqs))
				for j, r := range reqs {
					r.Key = singleKeys[j]
					want, err := single(ctx, l, r)
					require.NoError(t, err, "request %d", j)
					require.NoError(t, got[j].Err, "request %d", j)
					require.Equal(t, want, got[j].Grant, "request %d", j)
					if r.Release {
						require.True(t, got[j].Allowed, "request %d", j)
						require.Zero(t, got[j].Extra)
						require.Zero(t, got[j].Reserved)
						require.Zero(t, got[j].Expires)
					}
				}
				// The state left behind is the same: each key's next lease
				// by either holder is answered alike.
				clock.Advance(50 * time.Millisecond)
				for j := range reqs {
					for _, holder := range []int64{1, 2} {
						r := ext.LeaseRequest{Limit: leaseLimit, Holder: holder, Cost: 1, Extra: 100, Hold: hold}
						r.Key = batchKeys[j]
						b, err := l.Lease(ctx, r)
						require.NoError(t, err)
						r.Key = singleKeys[j]
						s, err := l.Lease(ctx, r)
						require.NoError(t, err)
						require.Equal(t, s, b, "key %d, holder %d", j, holder)
					}
				}

				// A release is validated as Release validates it.
				for name, r := range map[string]ext.LeaseRequest{
					"holder 0":         {Key: batchKeys[0], Limit: leaseLimit, Holder: 0, Release: true},
					"negative unspent": {Key: batchKeys[0], Limit: leaseLimit, Holder: 1, Release: true, Unspent: -1},
					"huge unspent":     {Key: batchKeys[0], Limit: leaseLimit, Holder: 1, Release: true, Unspent: sluice.MaxBurst + 1},
					"empty key":        {Limit: leaseLimit, Holder: 1, Release: true},
					"bad limit":        {Key: batchKeys[0], Holder: 1, Release: true},
				} {
					_, err := l.LeaseBatch(ctx, []ext.LeaseRequest{{Key: batchKeys[1], Limit: leaseLimit, Holder: 1, Hold: hold}, r})
					var reqErr *sluice.RequestError
					require.ErrorAs(t, err, &reqErr, name)
					require.Equal(t, 1, reqErr.Index, name)
					_, single := l.Release(ctx, r.Key, r.Limit, r.Holder, r.Unspent)
					require.Error(t, single, name)
					require.Equal(t, errors.Is(single, sluice.ErrInvalidCost), errors.Is(err, sluice.ErrInvalidCost), name)
					require.Equal(t, errors.Is(single, sluice.ErrInvalidKey), errors.Is(err, sluice.ErrInvalidKey), name)
					require.Equal(t, errors.Is(single, sluice.ErrInvalidLimit), errors.Is(err, sluice.ErrInvalidLimit), name)
				}
				// Lease takes only.
				_, err = l.Lease(ctx, ext.LeaseRequest{Key: batchKeys[0], Limit: leaseLimit, Holder: 1, Release: true, Hold: hold})
				require.ErrorIs(t, err, sluice.ErrInvalidCost)
			})
		}
	}
}

// TestLeaseScriptsRejectBadArguments: the lease scripts check every
// argument before any write, as their Go twin does, in hex and in
// decimal, for callers that reach them directly.
func TestLeaseScriptsRejectBadArguments(t *testing.T) {
	for _, tier := range []sluicetest.Tier{sluicetest.MemTier(t),
		redistest.GoRedisTier(t, redistest.SharedRedis(t)), redistest.DecimalTier(t, redistest.SharedRedis(t))} {
		t.Run(tier.Name, func(t *testing.T) {
			k := sluice.Key(sluicetest.UniqueKey(t)) + ":tb"
			keys := []string{k, algorithm.LedgerKey(k)}
			// rate, period_us, burst, cost, op, extra, held, hold_us, holder
			ok := []int64{100, 1_000_000, 100, 1, 1, 10, 0, 1_000_000, 7}
			with := func(i int, v int64) []int64 {
				args := append([]int64(nil), ok...)
				args[i] = v
				return args
			}
			for _, tc := range []struct {
				name string
				keys []string
				args []int64
				code string
			}{
				{"one key", keys[:1], ok, ext.CodeInvalidKey},
				{"empty key", []string{"", keys[1]}, ok, ext.CodeInvalidKey},
				{"8 arguments", keys, ok[:8], ext.CodeInvalidLimit},
				{"rate 0", keys, with(0, 0), ext.CodeInvalidLimit},
				{"period 999", keys, with(1, 999), ext.CodeInvalidLimit},
				{"burst over 1e12", keys, with(2, 1e12+1), ext.CodeInvalidLimit},
				{"interval not within 1%", keys, []int64{700, 1000, 100, 1, 1, 0, 0, 1_000_000, 7}, ext.CodeInvalidLimit},
				{"negative cost", keys, with(3, -1), ext.CodeInvalidCost},
				{"op 3", keys, with(4, 3), ext.CodeInvalidCost},
				{"negative extra", keys, with(5, -1), ext.CodeInvalidCost},
				{"held over 1e12", keys, with(6, 1e12+1), ext.CodeInvalidCost},
				{"hold 999 us", keys, with(7, 999), ext.CodeInvalidCost},
				{"holder 0", keys, with(8, 0), ext.CodeInvalidCost},
				{"negative holder", keys, with(8, -7), ext.CodeInvalidCost},
				{"cost over burst", keys, with(3, 101), ext.CodeCostExceedsBurst},
				{"now out of range", keys, append(append([]int64(nil), ok...), algorithm.MaxNowMicros+1), ext.CodeInvalidLimit},
			} {
				for _, script := range []*sluice.Script{algorithm.LeaseScript, algorithm.LeaseBatchScript} {
					if script == algorithm.LeaseBatchScript && (tc.name == "one key" || tc.name == "8 arguments") {
						continue // the batch answers a bad count for the whole call, tested below
					}
					reply, err := tier.Store.Run(t.Context(), script, tc.keys, tc.args)
					if script == algorithm.LeaseBatchScript && err == nil {
						// A bad operation of a batch is its reply's code
						// (batch.lua's numbering).
						batchCode := map[string]int64{ext.CodeInvalidLimit: 1, ext.CodeInvalidCost: 2,
							ext.CodeCostExceedsBurst: 3, ext.CodeInvalidKey: 4}[tc.code]
						require.Equal(t, []int64{-1, batchCode, 0, 0, 0, 0, 0}, reply, tc.name)
					} else {
						var se *ext.ServerError
						require.ErrorAs(t, err, &se, "%s: an error reply", tc.name)
						require.Equal(t, tc.code, se.Code, tc.name)
					}
					for _, key := range keys {
						_, found, err := tier.Get(t.Context(), key)
						require.NoError(t, err)
						require.False(t, found, "%s: nothing written", tc.name)
					}
				}
			}
			_, err := tier.Store.Run(t.Context(), algorithm.LeaseBatchScript, keys[:1], ok)
			require.ErrorContains(t, err, ext.CodeInvalidKey)
			// A batch whose first operation has a negative rate (sent in
			// decimal, when the others are in hex): that one fails, the
			// next is granted, in each number's own encoding.
			k2 := sluice.Key(sluicetest.UniqueKey(t), "2") + ":tb"
			reply, err := tier.Store.Run(t.Context(), algorithm.LeaseBatchScript,
				[]string{k, algorithm.LedgerKey(k), k2, algorithm.LedgerKey(k2)}, append(with(0, -1), ok...))
			require.NoError(t, err)
			require.Equal(t, []int64{-1, 1, 0, 0, 0, 0, 0}, reply[:7])
			require.Equal(t, []int64{1, 89, 0, 110000, 10, 1_000_000, 10}, reply[7:], "a grant of 10 beside the cost of 1")
		})
	}
}

// TestLeaseWritesTheStateText: on the server's clock a lease writes the
// bucket as the decision scripts do (state_text.lua), "0x" and 14 hex
// digits, the key expiring at most three seconds after the bucket is
// full, so that either keeps the other's expiry; and the token bucket
// decides on it as on its own state.
func TestLeaseWritesTheStateText(t *testing.T) {
	tier := redistest.GoRedisTier(t, redistest.SharedRedis(t))
	tb, err := tokenbucket.New(tier.Store)
	require.NoError(t, err)
	key := sluice.Key(sluicetest.UniqueKey(t))
	g, err := tb.Lease(t.Context(), ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 3, Cost: 1, Extra: 20, Hold: hold})
	require.NoError(t, err)
	require.Positive(t, g.Extra)
	raw, found, err := tier.Get(t.Context(), key+tokenbucket.KeySuffix)
	require.NoError(t, err)
	require.True(t, found)
	require.Regexp(t, `^0x[0-9a-f]{14}$`, raw)
	ttl, ok, err := tier.TTL(t.Context(), key+tokenbucket.KeySuffix)
	require.NoError(t, err)
	require.True(t, ok, "the bucket key has an expiry")
	require.Greater(t, ttl, g.ResetAfter, "it outlives the bucket's refill")
	require.LessOrEqual(t, ttl, g.ResetAfter+3*time.Second)
	d, err := tb.AllowN(t.Context(), key, leaseLimit, 0)
	require.NoError(t, err)
	require.LessOrEqual(t, d.Remaining, leaseLimit.Burst-1-g.Extra, "the decision sees what the lease took")
}

// TestLeaseReadsEachNumbersOwnEncoding: for callers that reach the lease
// script directly, an operation's numbers are hex when its rate is, a
// holder and now_us are read in either encoding whatever the others',
// and every mix decides as the store's own call does.
func TestLeaseReadsEachNumbersOwnEncoding(t *testing.T) {
	tier := redistest.GoRedisTier(t, redistest.SharedRedis(t))
	require.NotNil(t, tier.Raw)
	now := sluicetest.Epoch.UnixMicro()
	keysOf := func(name string) []string {
		k := sluice.Key(sluicetest.UniqueKey(t), name) + ":tb"
		return []string{k, algorithm.LedgerKey(k)}
	}
	want, err := tier.Store.Run(t.Context(), algorithm.LeaseScript, keysOf("store"),
		[]int64{100, 1_000_000, 100, 1, 1, 10, 0, 1_000_000, 7, now})
	require.NoError(t, err)
	require.EqualValues(t, 1, want[0])
	hexNow, decNow := fmt.Sprintf("0x%x", now), fmt.Sprint(now)
	for name, args := range map[string][]string{
		"decimal, hex holder":     {"100", "1000000", "100", "1", "1", "10", "0", "1000000", "0x7", decNow},
		"decimal, hex now":        {"100", "1000000", "100", "1", "1", "10", "0", "1000000", "7", hexNow},
		"hex, decimal holder":     {"0x64", "0xf4240", "0x64", "0x1", "0x1", "0xa", "0x0", "0xf4240", "7", hexNow},
		"hex, decimal now":        {"0x64", "0xf4240", "0x64", "0x1", "0x1", "0xa", "0x0", "0xf4240", "0x7", decNow},
		"decimal, all in decimal": {"100", "1000000", "100", "1", "1", "10", "0", "1000000", "7", decNow},
	} {
		got, err := tier.Raw(t.Context(), algorithm.LeaseScript, keysOf(name), args...)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
	}
}

// TestAPackedHolderNamesTheSameReservation: a holder sent packed with the
// other numbers (sluice.Script.Args) names its reservation in the ledger
// by the text Sluice's stores sent one per argument, "0x" and hex digits,
// so that a reservation taken either way is found the other way (a
// rolling upgrade keeps every holder's reservation), on Redis and the
// embedded store.
func TestAPackedHolderNamesTheSameReservation(t *testing.T) {
	emb, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = emb.Close() })
	for name, addr := range map[string]string{"redis": redistest.SharedRedis(t).Addr(), "embedded": emb.Addr()} {
		t.Run(name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			packedStore, err := goredisstore.New(c)
			require.NoError(t, err)
			packed, err := tokenbucket.New(packedStore)
			require.NoError(t, err)
			perArgument, err := tokenbucket.New(redistest.HexStore(c))
			require.NoError(t, err)
			require.Len(t, algorithm.LeaseScript.Args([]int64{1, 2, 3, 4, 5, 6, 7, 8, 0x1234}), 1, "the lease script's numbers go packed")
			for i, way := range []struct{ take, release *tokenbucket.Limiter }{{packed, perArgument}, {perArgument, packed}} {
				key := sluice.Key(sluicetest.UniqueKey(t), fmt.Sprint(i))
				ledger := algorithm.LedgerKey(key + tokenbucket.KeySuffix)
				g, err := way.take.Lease(t.Context(), ext.LeaseRequest{Key: key, Limit: leaseLimit, Holder: 0x1234, Cost: 1, Extra: 10, Hold: hold})
				require.NoError(t, err)
				require.EqualValues(t, 10, g.Extra)
				fields, err := c.HKeys(t.Context(), ledger).Result()
				require.NoError(t, err)
				require.Equal(t, []string{"0x1234"}, fields, "the reservation's name")
				_, err = way.release.Release(t.Context(), key, leaseLimit, 0x1234, 10)
				require.NoError(t, err)
				n, err := c.HLen(t.Context(), ledger).Result()
				require.NoError(t, err)
				require.Zero(t, n, "released in the other encoding: the same reservation")
			}
		})
	}
}
