package coalesce_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/memstore"
)

// Wrap any Sluice algorithm: a lone caller is decided at once, concurrent
// callers share script calls.
func Example() {
	store, err := memstore.New() // in production: a Redis store
	if err != nil {
		panic(err)
	}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := coalesce.New(tb)
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := limiter.AllowN(context.Background(), sluice.Key("tenant:42"), sluice.Limit{Rate: 2, Period: 1e9, Burst: 2}, 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}

// Many goroutines on one key: however their calls are batched (that
// depends on timing), each is decided exactly as alone, so exactly the
// burst is allowed.
func Example_concurrent() {
	store, err := embedded.Start() // the Lua script, on an in-process Redis
	if err != nil {
		panic(err)
	}
	defer store.Close()
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := coalesce.New(tb, coalesce.WithMaxInFlight(2))
	if err != nil {
		panic(err)
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			d, err := limiter.AllowN(context.Background(), sluice.Key("tenant:42", "api"), sluice.PerHour(60), 1)
			if err != nil {
				panic(err)
			}
			if d.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println("calls:", limiter.Stats().Calls, "allowed:", allowed.Load())
	// Output:
	// calls: 100 allowed: 60
}

// Refunds, resets, capacities and leases go straight to the wrapped
// limiter: the decorator serves every capability it serves.
func Example_refund() {
	ctx := context.Background()
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := coalesce.New(tb)
	if err != nil {
		panic(err)
	}
	refunder, ok := sluice.As[sluice.Refunder](limiter) // through the decorator
	fmt.Println("refunds:", ok)

	key, limit := sluice.Key("tenant:42", "export"), sluice.PerMinute(10)
	d, err := limiter.AllowN(ctx, key, limit, 5) // an estimated cost
	if err != nil {
		panic(err)
	}
	fmt.Println("remaining:", d.Remaining)
	d, err = refunder.Refund(ctx, key, limit, 3) // the request used 2
	if err != nil {
		panic(err)
	}
	fmt.Println("after the refund:", d.Remaining)
	// Output:
	// refunds: true
	// remaining: 5
	// after the refund: 8
}
