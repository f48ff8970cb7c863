package fixedwindow_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

func Example() {
	// At sluicetest.Epoch, the current one-second window ends in 876543 µs.
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store, _ := memstore.New()
	limiter, _ := fixedwindow.New(store, fixedwindow.WithClock(clock))
	ctx := context.Background()
	limit := sluice.PerSecond(3)

	d, _ := limiter.AllowN(ctx, "k", limit, 3)
	fmt.Println(d.Allowed, d.Remaining)
	d, _ = limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed, d.RetryAfter) // until the window ends
	clock.Advance(d.RetryAfter)
	d, _ = limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// true 0
	// false 876.543ms
	// true 2
}
