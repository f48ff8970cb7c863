package lease_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/store/memstore"
)

// The first request of a key takes a lease of up to B tokens with it (at
// most a quarter of what the limit has left); the next ones are spent from
// the lease without a call to the store, their Remaining an estimate of
// the shared limit (Estimated). Close gives back what was not spent.
func Example() {
	ctx := context.Background()
	store, err := memstore.New() // in production: a Redis store
	if err != nil {
		panic(err)
	}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := lease.New(tb, lease.WithSize(10)) // B = 10
	if err != nil {
		panic(err)
	}
	key := sluice.Key("tenant:42", "api")
	limit := sluice.PerMinute(100)

	for range 5 {
		d, err := limiter.AllowN(ctx, key, limit, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v source=%v estimated=%v\n", d.Allowed, d.Source, d.Estimated)
	}
	// The first decision took the lease from the store; the next four were
	// spent from it, while the lease was topped up in the background.

	// Refunds go back into the lease, up to what it has spent.
	refunder, ok := sluice.As[sluice.Refunder](limiter)
	fmt.Println("refund:", ok)
	if _, err := refunder.Refund(ctx, key, limit, 2); err != nil {
		panic(err)
	}

	// A lease.Limiter serves what the token bucket serves but leases: it
	// does not lease to a decorator above it.
	_, resets := sluice.As[sluice.Resetter](limiter)
	_, batches := sluice.As[sluice.BatchLimiter](limiter)
	_, bounded := sluice.As[sluice.Bounded](limiter)
	_, leases := sluice.As[ext.Leaser](limiter)
	fmt.Println("reset:", resets, "batch:", batches, "bound:", bounded, "lease:", leases)

	if err := limiter.Close(); err != nil { // releases the unspent tokens
		panic(err)
	}
	fmt.Println("releases:", limiter.Stats().Releases)
	_, err = limiter.AllowN(ctx, key, limit, 1)
	fmt.Println(err)
	// Output:
	// allowed=true source=store estimated=true
	// allowed=true source=lease estimated=true
	// allowed=true source=lease estimated=true
	// allowed=true source=lease estimated=true
	// allowed=true source=lease estimated=true
	// refund: true
	// reset: true batch: true bound: true lease: false
	// releases: 1
	// lease: limiter closed
}
