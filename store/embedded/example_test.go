package embedded_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/store/embedded"
)

// The zero-setup default: an in-process Redis (miniredis) running the same
// Lua scripts as a redis-server would.
func Example() {
	store, err := embedded.Start()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	limiter, _ := tokenbucket.New(store)
	for range 3 {
		d, _ := limiter.AllowN(context.Background(), sluice.Key("tenant:42"), sluice.PerMinute(2), 1)
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}
