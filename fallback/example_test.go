package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/memstore"
)

// outage is a store that fails while down is set, as a Redis does when it
// cannot be reached.
type outage struct {
	sluice.Store
	down atomic.Bool
}

func (s *outage) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if s.down.Load() {
		return nil, errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")
	}
	return s.Store.Run(ctx, script, keys, args)
}

// While the store cannot answer, the policy decides (Open by default), and
// the Decision says so.
func Example() {
	ctx := context.Background()
	mem, err := memstore.New()
	if err != nil {
		panic(err)
	}
	store := &outage{Store: mem}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	// The Open policy and the breaker's defaults. The time budget of a call
	// to the store is DefaultTimeout, 50 ms, unless given: the example
	// gives more, so that a loaded test machine cannot make it fall back.
	limiter, err := fallback.New(tb, fallback.WithTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	key := sluice.Key("tenant:42", "api")
	limit := sluice.PerMinute(100)

	show := func() {
		d, err := limiter.AllowN(ctx, key, limit, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d source=%s degraded=%v\n", d.Allowed, d.Remaining, d.Source, d.Degraded())
	}
	show()
	store.down.Store(true)
	show() // allowed without counting: Remaining is unknown (0)
	store.down.Store(false)
	show() // one failure does not open the breaker: the store decides again
	fmt.Println("breaker:", limiter.Stats().Breaker)
	// Output:
	// allowed=true remaining=99 source=store degraded=false
	// allowed=true remaining=0 source=fallback-open degraded=true
	// allowed=true remaining=98 source=store degraded=false
	// breaker: closed
}

// Fail closed, on a store that is gone (here an embedded store already
// stopped): each failure is denied with the breaker's cooldown as
// RetryAfter, and after two failures the breaker opens, so the store is no
// longer tried.
func ExampleClosed() {
	store, err := embedded.Start()
	if err != nil {
		panic(err)
	}
	if err := store.Close(); err != nil {
		panic(err)
	}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := fallback.New(tb,
		fallback.WithPolicy(fallback.Closed()),
		fallback.WithBreaker(fallback.Breaker{Failures: 2, Cooldown: 30 * time.Second, Probes: 1}),
		fallback.WithStateChange(func(from, to fallback.BreakerState) { fmt.Println("breaker:", from, "->", to) }),
	)
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := limiter.AllowN(context.Background(), sluice.Key("tenant:42", "api"), sluice.PerMinute(100), 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v retry after=%s source=%s degraded=%v\n", d.Allowed, d.RetryAfter, d.Source, d.Degraded())
	}
	// Output:
	// allowed=false retry after=30s source=fallback-closed degraded=true
	// breaker: closed -> open
	// allowed=false retry after=30s source=fallback-closed degraded=true
	// allowed=false retry after=30s source=fallback-closed degraded=true
}

// The Local policy decides with an in-process limiter of the same
// algorithm, sized to this replica's share of the limit: with 4 replicas,
// 25 of 100 per minute each.
func ExampleLocal() {
	mem, err := memstore.New()
	if err != nil {
		panic(err)
	}
	store := &outage{Store: mem}
	store.down.Store(true)
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	localStore, err := memstore.New()
	if err != nil {
		panic(err)
	}
	local, err := tokenbucket.New(localStore)
	if err != nil {
		panic(err)
	}
	policy, err := fallback.Local(local, fallback.Replicas(4))
	if err != nil {
		panic(err)
	}
	limiter, err := fallback.New(tb, fallback.WithPolicy(policy))
	if err != nil {
		panic(err)
	}
	d, err := limiter.AllowN(context.Background(), sluice.Key("tenant:42", "api"), sluice.PerMinute(100), 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("allowed=%v limit=%s remaining=%d source=%s\n", d.Allowed, d.Limit, d.Remaining, d.Source)

	// Refunds, resets and releases are not decided by a policy: they go to
	// the store, and its failure is an error.
	refunder, ok := sluice.As[sluice.Refunder](limiter)
	fmt.Println("refund:", ok)
	_, err = refunder.Refund(context.Background(), sluice.Key("tenant:42", "api"), sluice.PerMinute(100), 1)
	fmt.Println(err)
	// Output:
	// allowed=true limit=25/1m0s burst 25 remaining=24 source=fallback-local
	// refund: true
	// tokenbucket: dial tcp 10.0.0.7:6379: connect: connection refused
}
