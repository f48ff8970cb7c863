package slidinglog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

func Example() {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store, _ := memstore.New()
	limiter, _ := slidinglog.New(store, slidinglog.WithClock(clock))
	ctx := context.Background()
	limit := sluice.PerSecond(2)

	d, _ := limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed, d.Remaining)
	clock.Advance(300 * time.Millisecond)
	d, _ = limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed, d.Remaining)
	d, _ = limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed, d.RetryAfter) // when the first entry leaves the last second
	// Output:
	// true 1
	// true 0
	// false 700ms
}
