package sluicetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// A fake clock drives an in-process store, so that a test of a limiter
// decides by the time it sets, not the machine's.
func ExampleFakeClock() {
	clock := sluicetest.NewFakeClock(time.Unix(0, 0))
	store, _ := memstore.New(memstore.WithClock(clock))
	limiter, _ := tokenbucket.New(store)
	limit := sluice.PerMinute(1)
	d, _ := limiter.AllowN(context.Background(), "k", limit, 1)
	fmt.Println(d.Allowed)
	d, _ = limiter.AllowN(context.Background(), "k", limit, 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	clock.Advance(time.Minute)
	d, _ = limiter.AllowN(context.Background(), "k", limit, 1)
	fmt.Println(d.Allowed)
	// Output:
	// true
	// false 1m0s
	// true
}
