package bench_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/bench/harness"
	"github.com/sluicehq/sluice/store/embedded"
)

// Running one scenario against one subject programmatically, on the
// embedded store: what `sluice bench --scenarios steady` does from the
// command line for every subject.
func Example() {
	store, err := embedded.Start()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	client := redis.NewClient(&redis.Options{Addr: store.Addr(), MaxRetries: -1})
	defer client.Close()

	var scenarios []harness.Scenario
	for _, s := range harness.Scenarios() {
		if strings.HasPrefix(s.Name, "steady") {
			scenarios = append(scenarios, s)
		}
	}
	var subjects []harness.Subject
	for _, s := range harness.Subjects() {
		if s.Name == "sluice/tokenbucket" {
			subjects = append(subjects, s)
		}
	}
	results := harness.Run(context.Background(), harness.Options{
		Duration: 500 * time.Millisecond, Scenarios: scenarios, Subjects: subjects,
		Clients: harness.Clients{GoRedis: client},
	})
	for _, r := range results {
		fmt.Printf("%s: every request under the limit admitted: %t\n", r.Subject, r.Error == "" && r.Admitted == r.Requests)
	}
	// Output:
	// sluice/tokenbucket: every request under the limit admitted: true
}
