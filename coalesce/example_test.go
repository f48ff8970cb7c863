package coalesce_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/store/memstore"
)

// Wrap any Sluice algorithm: a lone caller is decided at once, concurrent
// callers share script calls.
func Example() {
	tb, err := tokenbucket.New(memstore.New()) // in production: a Redis store
	if err != nil {
		panic(err)
	}
	limiter, err := coalesce.New(tb)
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := limiter.AllowN(context.Background(), sluice.Key("tenant:42"), sluice.Limit{Rate: 2, Period: 1e9, Burst: 2}, 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}
