package stack_test

import (
	"context"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

// A stack declared in YAML, as a policy file declares one, built on a
// store; a cost that a shard's share can never allow is refused at build.
func ExampleBuild() {
	var spec stack.Spec
	if err := yaml.Unmarshal([]byte(`
rate: 100
period: 1m
lease: 10
shards: 4
hot_keys: [tenant-42]
fallback: open
`), &spec); err != nil {
		panic(err)
	}
	store, err := memstore.New() // in production: a Redis store
	if err != nil {
		panic(err)
	}
	limiter, err := stack.Build(spec, store)
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	fmt.Println(limiter.Layers(), limiter.Limit(), limiter.Cost())
	d, err := limiter.Allow(context.Background(), sluice.Key("tenant-42", "api"))
	if err != nil {
		panic(err)
	}
	fmt.Println("allowed:", d.Allowed)

	spec.Cost = 30 // a share holds 25
	_, err = stack.Build(spec, store)
	fmt.Println(err != nil)
	// Output:
	// [fallback shard lease tokenbucket] 100/1m0s burst 100 1
	// allowed: true
	// true
}
