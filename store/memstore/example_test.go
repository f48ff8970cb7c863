package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// The in-process store runs each script's Go twin: the same decisions as
// Redis, for one process. With a clock of its own, time is the test's.
func Example() {
	clock := sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))
	store, _ := memstore.New(memstore.WithClock(clock))
	limiter, _ := gcra.New(store)
	limit := sluice.PerSecond(1)
	ctx := context.Background()
	d, _ := limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed)
	d, _ = limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	clock.Advance(d.RetryAfter)
	d, _ = limiter.AllowN(ctx, "k", limit, 1)
	fmt.Println(d.Allowed)
	// Output:
	// true
	// false 1s
	// true
}
