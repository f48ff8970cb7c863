package gcra_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

func Example() {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store, _ := memstore.New()
	limiter, _ := gcra.New(store, gcra.WithClock(clock))
	ctx := context.Background()
	limit := sluice.Limit{Rate: 2, Period: time.Second, Burst: 2} // one every 500 ms, 2 at once

	for range 3 {
		d, _ := limiter.AllowN(ctx, "k", limit, 1)
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	}
	d, _ := limiter.Refund(ctx, "k", limit, 1) // the last allowed request did not need its slot
	fmt.Println(d.Remaining)
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 500ms
	// 1
}
