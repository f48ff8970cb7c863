package harness_test

import (
	"fmt"

	"github.com/sluicehq/sluice/bench/harness"
)

// The headline compares subjects of the same throughput scenario as ratios;
// here from two made-up results.
func ExampleHeadlineOf() {
	report := harness.Report{Results: []harness.Result{
		{Scenario: "throughput: one hot key, 128 goroutines, all allowed", Subject: "sluice/tokenbucket+coalesce", DecisionsPerSecond: 150_000, ServerMicrosPerDecision: 3},
		{Scenario: "throughput: one hot key, 128 goroutines, all allowed", Subject: "go-redis/redis_rate (GCRA)", DecisionsPerSecond: 50_000, ServerMicrosPerDecision: 7.5},
	}}
	for _, h := range harness.HeadlineOf(report) {
		for _, l := range h.Rows {
			fmt.Printf("%s: %.2f × the decisions/s, %.2f × the Redis CPU per decision\n", l.Label, l.DecisionsRatio, l.ServerMicrosRatio)
		}
	}
	// Output:
	// coalesced vs redis_rate: 3.00 × the decisions/s, 0.40 × the Redis CPU per decision
}

// A doc quotes a run between two HTML comments; RewriteDocBlocks replaces
// what is between them, which is how `sluice bench --docs` keeps the docs'
// figures those of the committed run.
func ExampleRewriteDocBlocks() {
	doc := "# Figures\n\n<!-- sluice bench: headline -->\nold table\n<!-- end sluice bench -->\n"
	text, names, err := harness.RewriteDocBlocks(doc, map[string]string{"headline": "| new | table |"})
	if err != nil {
		panic(err)
	}
	fmt.Print(text)
	fmt.Println(names)
	// Output:
	// # Figures
	//
	// <!-- sluice bench: headline -->
	// | new | table |
	// <!-- end sluice bench -->
	// [headline]
}
