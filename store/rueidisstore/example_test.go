package rueidisstore_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// A store on a rueidis client, whose automatic pipelining batches
// concurrent decisions. Here the client talks to the embedded Redis; point
// InitAddress at your Redis (or Cluster nodes, or sentinels) instead.
func Example() {
	server, _ := embedded.Start()
	defer server.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	store, err := rueidisstore.New(client)
	if err != nil {
		panic(err)
	}
	limiter, _ := tokenbucket.New(store)
	d, err := limiter.AllowN(context.Background(), sluice.Key("tenant:42"), sluice.PerSecond(10), 1)
	fmt.Println(d.Allowed, d.Remaining, err)
	// Output:
	// true 9 <nil>
}
