package shard_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/store/memstore"
)

// Shard one hot tenant's keys over four sub-keys, each with a quarter of
// the limit, so that on Redis Cluster its traffic is spread over four
// parts of the slot range; every other tenant passes through unchanged.
func Example() {
	ctx := context.Background()
	store, err := memstore.New() // in production: a Redis Cluster store
	if err != nil {
		panic(err)
	}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := shard.New(tb, shard.WithHotKeys("tenant:42")) // DefaultShards: 4
	if err != nil {
		panic(err)
	}
	hot := sluice.Key("tenant:42", "api") // rl:{tenant:42}:api, sharded by its tag
	cold := sluice.Key("tenant:43", "api")
	fmt.Println("sharded:", limiter.Sharded(hot), limiter.Sharded(cold))

	limit := sluice.PerMinute(1000) // split into 4 shares of 250 per minute
	d, err := limiter.AllowN(ctx, hot, limit, 1)
	if err != nil {
		panic(err)
	}
	// About the whole limit: one share's 249 left, scaled to the whole.
	fmt.Printf("hot:  allowed=%v limit=%s remaining=%d estimated=%v\n", d.Allowed, d.Limit, d.Remaining, d.Estimated)
	d, err = limiter.AllowN(ctx, cold, limit, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("cold: allowed=%v limit=%s remaining=%d estimated=%v\n", d.Allowed, d.Limit, d.Remaining, d.Estimated)

	// A request must fit one share.
	c, err := limiter.Capacity(hot, limit)
	if err != nil {
		panic(err)
	}
	fmt.Println("largest cost for the hot key:", c)

	// The Limiter serves what the token bucket serves, found with
	// sluice.As. A refund goes to the share that is short; the Decision
	// adds up the shares.
	refunder, ok := sluice.As[sluice.Refunder](limiter)
	if !ok {
		panic("the token bucket refunds")
	}
	d, err = refunder.Refund(ctx, hot, limit, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("after a refund:", d.Remaining)

	_, resets := sluice.As[sluice.Resetter](limiter)
	_, leases := sluice.As[ext.Leaser](limiter)
	fmt.Println("resets:", resets, "leases:", leases)
	// Output:
	// sharded: true false
	// hot:  allowed=true limit=1000/1m0s burst 1000 remaining=996 estimated=true
	// cold: allowed=true limit=1000/1m0s burst 1000 remaining=999 estimated=false
	// largest cost for the hot key: 250
	// after a refund: 1000
	// resets: true leases: true
}

// A sub-key keeps the key's shape and changes only its hash tag: the tag,
// '#', the share's number, '.', and a salt that puts its Redis Cluster
// slot in the middle of the share's quarter of the 16,384 slots.
func ExampleSubKeys() {
	for _, k := range shard.SubKeys(sluice.Key("tenant:42", "api"), 4) {
		fmt.Println(k, "slot", ext.HashSlot(k))
	}
	fmt.Println(shard.SubKey("tenant:42", 2, 4)) // share 2 of a key without a hash tag
	// Output:
	// rl:{tenant:42#0.11}:api slot 1706
	// rl:{tenant:42#1.31}:api slot 5756
	// rl:{tenant:42#2.51}:api slot 9990
	// rl:{tenant:42#3.22}:api slot 14406
	// {#tenant:42#2.52}
}
