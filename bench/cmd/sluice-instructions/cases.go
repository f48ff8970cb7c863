package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// call makes one EVALSHA call of a case.
type call func(context.Context) error

// testCase is one measurement: setup returns the call to repeat, which
// makes perCall decisions.
type testCase struct {
	name    string
	perCall int
	target  int64
	setup   func(context.Context, *redis.Client) (call, error)
}

// Issue 28's ceilings, instructions per decision.
const (
	targetSingle   = 45_000
	targetHotBatch = 6_000
	targetKeyBatch = 22_000
)

// allowAll is a limit no case's calls can exhaust: a million a second
// (a tenth of a second's worth for the sliding log, whose rate is at most
// 10,000 a period), a burst of a trillion.
func allowAll(alg string) sluice.Limit {
	if alg == "slidinglog" {
		return sluice.Limit{Rate: 10_000, Period: time.Second, Burst: 10_000}
	}
	l := sluice.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000_000_000}
	if alg != "tokenbucket" && alg != "gcra" {
		l.Burst = l.Rate
	}
	return l
}

func raw(src string, keys []string, args ...any) func(context.Context, *redis.Client) (call, error) {
	return func(_ context.Context, c *redis.Client) (call, error) {
		s := redis.NewScript(src)
		return func(ctx context.Context) error {
			err := s.Run(ctx, c, keys, args...).Err()
			if errors.Is(err, redis.Nil) {
				return nil
			}
			return err
		}, nil
	}
}

// packed is vs as Sluice's stores send a packed script's numbers: one
// argument (sluice.Script.Args).
func packed(vs ...int64) string {
	return sluice.NewPackedScript("", nil).Args(vs)[0]
}

func limiterOn(c *redis.Client, alg string) (sluice.Limiter, error) {
	store, err := goredisstore.New(c)
	if err != nil {
		return nil, err
	}
	return algorithms.New(alg, store)
}

// batchLimiterOn is limiterOn's limiter and its AllowBatch.
func batchLimiterOn(c *redis.Client, alg string) (sluice.Limiter, sluice.BatchLimiter, error) {
	l, err := limiterOn(c, alg)
	if err != nil {
		return nil, nil, err
	}
	b, ok := sluice.As[sluice.BatchLimiter](l)
	if !ok {
		return nil, nil, fmt.Errorf("%s has no AllowBatch", alg)
	}
	return l, b, nil
}

func cases() []testCase {
	cs := []testCase{
		// The references take a decision's key and four arguments.
		{name: "EVALSHA of return 1", perCall: 1, setup: raw("return 1", []string{"{t1}:e"}, 1000000, 1000000, 1000000000000, 1)},
		{name: "TIME, return 1", perCall: 1, setup: raw("local t = redis.call('TIME') return 1", []string{"{t1}:t"}, 1000000, 1000000, 1000000000000, 1)},
		{name: "INCR + PEXPIRE (no clock, no checks)", perCall: 1, setup: raw(
			"local c = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c", []string{"{t1}:i"}, 60000)},
		{name: "floor: TIME, GET, SET PX", perCall: 1, setup: raw(
			"local t = redis.call('TIME') redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], t[1], 'PX', ARGV[1]) return 1",
			[]string{"{t1}:f"}, 60000)},
		// The commands the multi-limit and lease scripts send, with their
		// numbers packed as they are sent (sluice.Script.Args) and no
		// check: their floors. A key's first call
		// writes it with SET; the others change it in place, as the
		// scripts do while a key's expiry stays.
		{name: "floor of two keys: TIME, MGET, 2 x SETRANGE", perCall: 1, setup: raw(
			"local t = redis.call('TIME') local v = redis.call('MGET', KEYS[1], KEYS[2]) "+
				"if not v[1] then redis.call('SET', KEYS[1], t[1]) redis.call('SET', KEYS[2], t[1]) "+
				"else redis.call('SETRANGE', KEYS[1], '0', t[1]) redis.call('SETRANGE', KEYS[2], '0', t[1]) end return 1",
			[]string{"{t1}:f1", "{t1}:f2"}, packed(1, 1_000_000, 1_000_000, 8_000_000_000_001, 1_000_000, 1_000_000, 8_000_000_000_002))},
		{name: "floor of a lease: TIME, GET, HGETALL, SETRANGE, HSET, PEXPIRE", perCall: 1, setup: raw(
			"local t = redis.call('TIME') local v = redis.call('GET', KEYS[1]) redis.call('HGETALL', KEYS[2]) "+
				"if not v then redis.call('SET', KEYS[1], t[1]) else redis.call('SETRANGE', KEYS[1], '0', t[1]) end "+
				"redis.call('HSET', KEYS[2], '7', t[1]) redis.call('PEXPIRE', KEYS[2], '60000') return 1",
			[]string{"{t1}:fl", "{t1}:fl:leases"}, packed(1_000_000, 1_000_000, 1_000_000_000_000, 1, 1, 10, 0, 1_000_000, 7))},
		// The commands the sliding log sends to admit a request on a key
		// it has written, with its numbers packed and no check.
		{name: "floor of a sliding log: TIME, 2 x ZCOUNT, ZADD, ZREMRANGEBYSCORE, ZREVRANGE, PEXPIRE", perCall: 1, setup: raw(
			"local t = redis.call('TIME') local now = t[1] * 1000000 + t[2] "+
				"redis.call('ZCOUNT', KEYS[1], now - 1000000, '+inf') redis.call('ZCOUNT', KEYS[1], now, now) "+
				"redis.call('ZADD', KEYS[1], now, string.format('%d', now)) "+
				"redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1000000) "+
				"redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES') redis.call('PEXPIRE', KEYS[1], '1100') return 1",
			[]string{"{t1}:fsl"}, packed(10_000, 1_000_000, 10_000, 1))},
		{name: "go-redis/redis_rate v10", perCall: 1, setup: func(_ context.Context, c *redis.Client) (call, error) {
			rl := redis_rate.NewLimiter(c)
			limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000_000, Period: time.Second}
			return func(ctx context.Context) error {
				_, err := rl.Allow(ctx, "t1", limit)
				return err
			}, nil
		}},
	}
	for _, alg := range algorithms.Names {
		cs = append(cs, testCase{name: alg, perCall: 1, target: targetSingle, setup: func(_ context.Context, c *redis.Client) (call, error) {
			l, err := limiterOn(c, alg)
			if err != nil {
				return nil, err
			}
			limit := allowAll(alg)
			return func(ctx context.Context) error { return allowed(l.AllowN(ctx, "{t1}:"+alg, limit, 1)) }, nil
		}})
	}
	for _, alg := range algorithms.Names {
		for _, hot := range []bool{true, false} {
			name, target := alg+", batch of 16 on one key", int64(targetHotBatch)
			if !hot {
				name, target = alg+", batch of 16 keys", targetKeyBatch
			}
			cs = append(cs, testCase{name: name, perCall: 16, target: target, setup: func(_ context.Context, c *redis.Client) (call, error) {
				_, b, err := batchLimiterOn(c, alg)
				if err != nil {
					return nil, err
				}
				reqs := make([]sluice.Request, 16)
				for i := range reqs {
					key := "{t1}:" + alg
					if !hot {
						key = fmt.Sprintf("{t1}:%s:%d", alg, i)
					}
					reqs[i] = sluice.Request{Key: key, Limit: allowAll(alg), N: 1}
				}
				return func(ctx context.Context) error { return allowedBatch(ctx, b, reqs) }, nil
			}})
		}
	}
	// A limit of one a second whose every request moves the key's state,
	// and so its expiry's second, a second on: before steady keys
	// (ext/algorithm state_text.lua) every write set a new expiry; a
	// steady key sets one about once in 32 writes.
	second := func(string) sluice.Limit { return sluice.Limit{Rate: 1, Period: time.Second, Burst: 100_000_000} }
	cs = append(cs, bucketCases("a second a request", "batch of 16 keys, a second a request", "second", second, false)...)
	// A key seen once: every call decides on keys no call has written,
	// so that each write creates its key with SET and an expiry, as a
	// limit on many keys, each seen seldom, does.
	cs = append(cs, bucketCases("a new key every call", "batch of 16 new keys", "new", allowAll, true)...)
	tb := multilimit.Check{Key: "{t1}:m:tb", Limit: allowAll("tokenbucket"), Algorithm: multilimit.TokenBucket}
	gcra := multilimit.Check{Key: "{t1}:m:gcra", Limit: allowAll("gcra"), Algorithm: multilimit.GCRA}
	for _, m := range []struct {
		name   string
		checks []multilimit.Check
	}{
		{"multilimit, 1 limit", []multilimit.Check{tb}},
		{"multilimit, tokenbucket + fixedwindow", []multilimit.Check{tb, {Key: "{t1}:m:fw", Limit: allowAll("fixedwindow"), Algorithm: multilimit.FixedWindow}}},
		{"multilimit, tokenbucket + gcra", []multilimit.Check{tb, gcra}},
		{"multilimit, tokenbucket + gcra + tokenbucket", []multilimit.Check{tb, gcra, {Key: "{t1}:m:tb2", Limit: allowAll("tokenbucket"), Algorithm: multilimit.TokenBucket}}},
	} {
		cs = append(cs, testCase{name: m.name, perCall: 1, target: targetSingle,
			setup: func(_ context.Context, c *redis.Client) (call, error) {
				store, err := goredisstore.New(c)
				if err != nil {
					return nil, err
				}
				ml, err := multilimit.New(store)
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context) error {
					d, err := ml.AllowN(ctx, m.checks, 1)
					if err == nil && !d.Allowed {
						err = errors.New("denied")
					}
					return err
				}, nil
			}})
	}
	for _, alg := range []string{"tokenbucket", "gcra"} {
		cs = append(cs, testCase{name: alg + " lease", perCall: 1, target: targetSingle, setup: func(_ context.Context, c *redis.Client) (call, error) {
			l, err := limiterOn(c, alg)
			if err != nil {
				return nil, err
			}
			leaser, ok := sluice.As[ext.Leaser](l)
			if !ok {
				return nil, fmt.Errorf("%s does not lease", alg)
			}
			req := ext.LeaseRequest{Key: "{t1}:lease:" + alg, Limit: allowAll(alg), Holder: 7, Cost: 1, Extra: 10, Hold: time.Second}
			return func(ctx context.Context) error {
				g, err := leaser.Lease(ctx, req)
				return allowed(g.Decision, err)
			}, nil
		}})
	}
	return cs
}

func allowed(d sluice.Decision, err error) error {
	if err == nil && !d.Allowed {
		err = errors.New("denied: the case's limit was exhausted")
	}
	return err
}

// allowedBatch makes reqs as one batch, every one of which must be
// allowed.
func allowedBatch(ctx context.Context, b sluice.BatchLimiter, reqs []sluice.Request) error {
	results, err := b.AllowBatch(ctx, reqs)
	if err != nil {
		return err
	}
	for _, r := range results {
		if err := allowed(r.Decision, r.Err); err != nil {
			return err
		}
	}
	return nil
}

// bucketCases is a single decision and a batch of 16 for the token bucket
// and GCRA under limit, named "ALG, single" and "ALG, batch": on the same
// keys at every call or, fresh, on keys no call has written.
func bucketCases(single, batch, keyPart string, limit func(alg string) sluice.Limit, fresh bool) []testCase {
	var cs []testCase
	for _, alg := range []string{"tokenbucket", "gcra"} {
		for _, perCall := range []int{1, 16} {
			name, target := alg+", "+single, int64(targetSingle)
			if perCall == 16 {
				name, target = alg+", "+batch, targetKeyBatch
			}
			cs = append(cs, testCase{name: name, perCall: perCall, target: target, setup: func(_ context.Context, c *redis.Client) (call, error) {
				l, b, err := batchLimiterOn(c, alg)
				if err != nil {
					return nil, err
				}
				lim, next := limit(alg), 0
				reqs := make([]sluice.Request, perCall)
				return func(ctx context.Context) error {
					for i := range reqs {
						n := i
						if fresh {
							n, next = next, next+1
						}
						reqs[i] = sluice.Request{Key: fmt.Sprintf("{t1}:%s:%s:%d", alg, keyPart, n), Limit: lim, N: 1}
					}
					if perCall == 1 {
						return allowed(l.AllowN(ctx, reqs[0].Key, lim, 1))
					}
					return allowedBatch(ctx, b, reqs)
				}, nil
			}})
		}
	}
	return cs
}
