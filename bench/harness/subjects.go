package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/throttled/throttled/v2"
	throttledredis "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// Decide asks whether one request against key is allowed.
type Decide func(ctx context.Context, key string) (bool, error)

// Clients are the connections subjects use, all to the same Redis, and
// the binaries the serve scenarios' process subjects start on it.
type Clients struct {
	GoRedis *redis.Client
	Rueidis rueidis.Client // nil on the embedded store (miniredis lacks what rueidis needs)
	// Binaries are looked up as Binaries.Find says where a field is empty.
	Binaries Binaries
}

// Subject is one limiter under test. New builds it for one scenario's
// limit; close releases what it holds.
type Subject struct {
	Name string
	// Remote says the subject talks to Redis (its commandstats count).
	Remote bool
	// Baseline marks a reference that is not a limiter (PING): it runs in
	// throughput scenarios only.
	Baseline bool
	New      func(c Clients, limit sluice.Limit) (decide Decide, close func(), err error)
	// Ping is a PING through the client the subject uses, the reference
	// for its latency; nil for in-process subjects and the PINGs.
	Ping func(c Clients) Decide
	// Over names the subject of the same scenario this one's overhead is
	// measured over (Result.Overhead); empty: none.
	Over string
}

// pingGoRedis and pingRueidis are a PING through each client.
func pingGoRedis(c Clients) Decide {
	return func(ctx context.Context, _ string) (bool, error) {
		return true, c.GoRedis.Ping(ctx).Err()
	}
}

func pingRueidis(c Clients) Decide {
	return func(ctx context.Context, _ string) (bool, error) {
		return true, c.Rueidis.Do(ctx, c.Rueidis.B().Ping().Build()).Error()
	}
}

// pingVia is the PING through the client c.store(goRedis) uses.
func pingVia(goRedis bool) func(c Clients) Decide {
	return func(c Clients) Decide {
		if c.Rueidis != nil && !goRedis {
			return pingRueidis(c)
		}
		return pingGoRedis(c)
	}
}

// store is a Sluice store on rueidis where available, or on go-redis
// (always, with goRedis).
func (c Clients) store(goRedis bool) (sluice.Store, error) {
	if c.Rueidis != nil && !goRedis {
		s, err := rueidisstore.New(c.Rueidis)
		if err != nil {
			return nil, fmt.Errorf("rueidis store: %w", err)
		}
		return s, nil
	}
	s, err := goredisstore.New(c.GoRedis)
	if err != nil {
		return nil, fmt.Errorf("go-redis store: %w", err)
	}
	return s, nil
}

func decideWith(l sluice.Limiter, limit sluice.Limit) Decide {
	return func(ctx context.Context, key string) (bool, error) {
		d, err := l.AllowN(ctx, key, limit, 1)
		if err == nil && d.Degraded() {
			return d.Allowed, errDegraded
		}
		return d.Allowed, err
	}
}

// errDegraded is what a Decide returns, with the decision, when a fallback
// policy made it instead of Redis: the recorder counts it
// (Result.Degraded) and the run is marked, since its figures are then not
// Redis's.
var errDegraded = errors.New("decided by a fallback policy, not by Redis")

// stackSubject is a Sluice subject built by stack.Build from spec, the
// run's limit filled in: the same builder as policy files use.
func stackSubject(name string, goRedis bool, spec stack.Spec) Subject {
	return Subject{Name: "sluice/" + name, Remote: true, Ping: pingVia(goRedis), New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
		store, err := c.store(goRedis)
		if err != nil {
			return nil, nil, err
		}
		spec.Rate, spec.Period = stack.Int(limit.Rate), stack.Duration(limit.Period)
		if refills(spec.Algorithm) {
			spec.Burst = stack.Int(limit.Burst) // a window has none: it allows the rate per period
		}
		st, err := stack.Build(spec, store)
		if err != nil {
			return nil, nil, err
		}
		return decideWith(st, limit), func() { _ = st.Close() }, nil
	}}
}

// refills reports whether the algorithm is a bucket, whose limit has a
// burst of its own.
func refills(algorithm string) bool {
	return algorithm == "" || algorithm == "tokenbucket" || algorithm == "gcra"
}

// Subjects returns every subject: Sluice's algorithms (through rueidis
// where available, else go-redis), the token bucket with a lease, the other
// libraries on the same Redis through go-redis, and x/time/rate in process.
func Subjects() []Subject {
	return []Subject{
		stackSubject("tokenbucket", false, stack.Spec{}),
		stackSubject("tokenbucket (go-redis)", true, stack.Spec{}),
		stackSubject("tokenbucket+coalesce", false, stack.Spec{Coalesce: true}),
		stackSubject("tokenbucket+coalesce (go-redis)", true, stack.Spec{Coalesce: true}),
		stackSubject("gcra", false, stack.Spec{Algorithm: "gcra"}),
		stackSubject("slidingcounter", false, stack.Spec{Algorithm: "slidingcounter"}),
		stackSubject("slidinglog", false, stack.Spec{Algorithm: "slidinglog"}),
		stackSubject("fixedwindow", false, stack.Spec{Algorithm: "fixedwindow"}),
		stackSubject("tokenbucket+lease(B=100)", false, stack.Spec{Lease: 100}),
		stackSubject("tokenbucket+fallback+sluiceotel", false, stack.Spec{Fallback: "open", Tracing: true}), // global (no-op) providers
		{Name: "go-redis/redis_rate (GCRA)", Remote: true, Ping: pingGoRedis, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			l := redis_rate.NewLimiter(c.GoRedis)
			rl := redis_rate.Limit{Rate: int(limit.Rate), Burst: int(limit.Burst), Period: limit.Period}
			return func(ctx context.Context, key string) (bool, error) {
				res, err := l.Allow(ctx, key, rl)
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			}, func() {}, nil
		}},
		{Name: "ulule/limiter (fixed window)", Remote: true, Ping: pingGoRedis, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			store, err := ululeredis.NewStoreWithOptions(c.GoRedis, ulule.StoreOptions{Prefix: "ulule", MaxRetry: 1})
			if err != nil {
				return nil, nil, err
			}
			l := ulule.New(store, ulule.Rate{Period: limit.Period, Limit: limit.Rate})
			return func(ctx context.Context, key string) (bool, error) {
				res, err := l.Get(ctx, key)
				return err == nil && !res.Reached, err
			}, func() {}, nil
		}},
		{Name: "throttled (GCRA)", Remote: true, Ping: pingGoRedis, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
			store, err := throttledredis.NewCtx(c.GoRedis, "throttled:")
			if err != nil {
				return nil, nil, err
			}
			var perPeriod throttled.Rate
			switch limit.Period {
			case time.Second:
				perPeriod = throttled.PerSec(int(limit.Rate))
			case time.Hour:
				perPeriod = throttled.PerHour(int(limit.Rate))
			default:
				return nil, nil, fmt.Errorf("throttled: only per-second and per-hour limits are wired here")
			}
			l, err := throttled.NewGCRARateLimiterCtx(store, throttled.RateQuota{MaxRate: perPeriod, MaxBurst: int(limit.Burst) - 1})
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context, key string) (bool, error) {
				limited, _, err := l.RateLimitCtx(ctx, key, 1)
				return err == nil && !limited, err
			}, func() {}, nil
		}},
		{Name: "PING (go-redis)", Remote: true, Baseline: true, New: func(c Clients, _ sluice.Limit) (Decide, func(), error) {
			return pingGoRedis(c), func() {}, nil
		}},
		{Name: "PING (rueidis)", Remote: true, Baseline: true, New: func(c Clients, _ sluice.Limit) (Decide, func(), error) {
			if c.Rueidis == nil {
				return nil, nil, fmt.Errorf("no rueidis client on the embedded store")
			}
			return pingRueidis(c), func() {}, nil
		}},
		{Name: "x/time/rate (in process)", New: func(_ Clients, limit sluice.Limit) (Decide, func(), error) {
			var limiters sync.Map
			every := rate.Every(limit.Period / time.Duration(limit.Rate))
			return func(_ context.Context, key string) (bool, error) {
				v, ok := limiters.Load(key)
				if !ok {
					v, _ = limiters.LoadOrStore(key, rate.NewLimiter(every, int(limit.Burst)))
				}
				return v.(*rate.Limiter).Allow(), nil
			}, func() {}, nil
		}},
	}
}
