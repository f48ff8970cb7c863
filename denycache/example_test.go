package denycache_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// A client that keeps retrying a denied key is answered locally until the
// store's RetryAfter (at most WithMaxStale) has passed, with that
// RetryAfter counted down.
func Example() {
	ctx := context.Background()
	// A fake clock drives the store and the cache, to make the example
	// deterministic; production code gives neither.
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	mem, err := memstore.New(memstore.WithClock(clock))
	if err != nil {
		panic(err)
	}
	store := &sluicetest.CountingStore{Store: mem}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := denycache.New(tb, denycache.WithClock(clock), denycache.WithMaxStale(5*time.Second))
	if err != nil {
		panic(err)
	}
	key := sluice.Key("client:203.0.113.7")
	limit := sluice.PerMinute(6) // a token every 10 s

	show := func() {
		d, err := limiter.AllowN(ctx, key, limit, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%-5v retry after=%-3s store calls=%d\n", d.Allowed, d.RetryAfter, store.Runs.Load())
	}
	for range 7 { // 6 allowed, then the store denies and the denial is remembered
		show()
	}
	clock.Advance(2 * time.Second)
	show() // denied locally
	clock.Advance(3 * time.Second)
	show() // 5 s later (WithMaxStale) the store is asked again

	// A refund through the decorator makes room, so it forgets the key's
	// denials.
	refunder, ok := sluice.As[sluice.Refunder](limiter)
	fmt.Println("refund:", ok)
	if _, err := refunder.Refund(ctx, key, limit, 1); err != nil {
		panic(err)
	}
	show()
	// Output:
	// allowed=true  retry after=0s  store calls=1
	// allowed=true  retry after=0s  store calls=2
	// allowed=true  retry after=0s  store calls=3
	// allowed=true  retry after=0s  store calls=4
	// allowed=true  retry after=0s  store calls=5
	// allowed=true  retry after=0s  store calls=6
	// allowed=false retry after=10s store calls=7
	// allowed=false retry after=8s  store calls=7
	// allowed=false retry after=5s  store calls=8
	// refund: true
	// allowed=true  retry after=0s  store calls=10
}
