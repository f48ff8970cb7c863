package slidingcounter_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

func Example() {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store, _ := memstore.New()
	limiter, _ := slidingcounter.New(store, slidingcounter.WithClock(clock))
	ctx := context.Background()
	limit := sluice.PerSecond(10)

	d, _ := limiter.AllowN(ctx, "k", limit, 10)
	fmt.Println(d.Allowed, d.Remaining)
	// The next window starts with the previous one's 10, weighted by how
	// much of it still overlaps the last second; RetryAfter says when 1
	// more fits.
	d, _ = limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	clock.Advance(d.RetryAfter)
	d, _ = limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// true 0
	// false 976.543ms
	// true 0
}
