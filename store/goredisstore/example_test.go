package goredisstore_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// A store on a go-redis client, with the settings a rate limiter wants
// (docs/failure.md). Here the client talks to the embedded Redis; point
// Addr at your Redis instead.
func Example() {
	server, _ := embedded.Start()
	defer server.Close()
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer client.Close()

	store, err := goredisstore.New(client)
	if err != nil {
		panic(err)
	}
	limiter, _ := tokenbucket.New(store)
	d, err := limiter.AllowN(context.Background(), sluice.Key("tenant:42"), sluice.PerSecond(10), 1)
	fmt.Println(d.Allowed, d.Remaining, err)
	// Output:
	// true 9 <nil>
}
