package sluice_test

import (
	"fmt"

	"github.com/sluicehq/sluice"
)

func ExampleKey() {
	// One tenant's keys share a hash tag, so they live in one Redis
	// Cluster slot; braces in user input are escaped and cannot move it.
	fmt.Println(sluice.Key("tenant:42", "route", "orders"))
	fmt.Println(sluice.Key("evil}{", "x"))
	// Output:
	// rl:{tenant:42}:route:orders
	// rl:{evil%7D%7B}:x
}

func ExampleLimit_Validate() {
	fmt.Println(sluice.PerMinute(100).WithBurst(20).Validate())
	fmt.Println(sluice.Limit{Rate: 0, Period: 1}.Validate())
	// Output:
	// <nil>
	// sluice: invalid limit 0/1ns burst 0: rate must be at least 1
}
