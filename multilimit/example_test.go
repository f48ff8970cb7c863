package multilimit_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// One request against a tenant's per-second burst and its hourly quota, in
// one script call: when the quota denies, the burst is not consumed either.
func Example() {
	// A fake clock makes the windows deterministic; production code uses
	// the Redis server's clock (no WithClock).
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := multilimit.New(store, multilimit.WithClock(clock))
	if err != nil {
		panic(err)
	}
	checks := []multilimit.Check{
		{Key: sluice.Key("tenant:42", "burst"), Limit: sluice.PerSecond(5)},
		{Key: sluice.Key("tenant:42", "quota"), Limit: sluice.PerHour(3), Algorithm: multilimit.FixedWindow},
	}
	for range 4 { // the fourth is denied by the quota, whose window ends on the hour
		d, err := limiter.AllowN(context.Background(), checks, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%-5v denied by=%-2d burst left=%d quota left=%d retry after=%s\n",
			d.Allowed, d.Denied, d.Limits[0].Remaining, d.Limits[1].Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true  denied by=-1 burst left=4 quota left=2 retry after=0s
	// allowed=true  denied by=-1 burst left=3 quota left=1 retry after=0s
	// allowed=true  denied by=-1 burst left=2 quota left=0 retry after=0s
	// allowed=false denied by=1  burst left=2 quota left=0 retry after=59m59.876543s
}
