package tokenbucket_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/memstore"
)

func Example() {
	// The embedded default: an in-process Redis running the same Lua
	// script a real one would. Swap in goredisstore.New(client) or
	// rueidisstore.New(client) for production.
	store, err := embedded.Start()
	if err != nil {
		panic(err)
	}
	defer store.Close()

	limiter, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limit := sluice.PerMinute(3) // 3 per minute, bursts of 3
	key := sluice.Key("user:42")
	for range 4 {
		d, err := sluice.Allow(context.Background(), limiter, key, limit)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry after=%s\n", d.Allowed, d.Remaining, d.RetryAfter.Round(time.Second))
	}
	// Output:
	// allowed=true remaining=2 retry after=0s
	// allowed=true remaining=1 retry after=0s
	// allowed=true remaining=0 retry after=0s
	// allowed=false remaining=0 retry after=20s
}

func ExampleLimiter_AllowN() {
	// The in-process store runs the script's Go twin; a fake clock makes
	// the example deterministic.
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store, _ := memstore.New()
	limiter, _ := tokenbucket.New(store, tokenbucket.WithClock(clock))
	ctx := context.Background()
	limit := sluice.Limit{Rate: 10, Period: time.Second, Burst: 5}

	d, _ := limiter.AllowN(ctx, "k", limit, 4) // a weighted request
	fmt.Println(d.Allowed, d.Remaining)
	d, _ = limiter.AllowN(ctx, "k", limit, 3)
	fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	clock.Advance(d.RetryAfter)
	d, _ = limiter.AllowN(ctx, "k", limit, 0) // a peek consumes nothing
	fmt.Println(d.Allowed, d.Remaining)

	_, err := limiter.AllowN(ctx, "k", limit, 6) // can never fit a burst of 5
	fmt.Println(errors.Is(err, sluice.ErrCostExceedsBurst))
	// Output:
	// true 1
	// false 1 200ms
	// true 3
	// true
}
