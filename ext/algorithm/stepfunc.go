package algorithm

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed step_function.lua
var stepFunctionSource string

// StepFunction returns the Lua text of a function expression that decides
// one limit of spec's algorithm, given as steps (Spec.Steps), in two
// passes, for a script that decides several limits all or nothing
// (multilimit):
//
//	function(key, raw, rate, period_us, burst, cost, now, dry)
//	  -> fail, allowed, remaining, retry_after, reset_after, raw
//
// Dry, it reads key and decides without writing, returning the string it
// read as raw; not dry, it decides on that raw and writes. It reads the
// script's locals MAX_NOW_US and MAX_FILL_US ([Lib]) and server_clock,
// true when now is the server's clock. step_function.lua has the
// contract. It returns an error when spec is nil or has no Steps.
func StepFunction(spec *Spec) (string, error) {
	if spec == nil {
		return "", fmt.Errorf("algorithm: StepFunction: a nil spec")
	}
	if spec.Steps == "" {
		return "", fmt.Errorf("algorithm: StepFunction: %s is not given as steps", spec.Name)
	}
	check, state, step, expiry := splitSteps(spec)
	text := fillSteps(stepFunctionSource, check, state, step, expiry)
	at := strings.Index(text, "\nfunction(")
	if at < 0 {
		panic("algorithm: step_function.lua has no line that starts with function(")
	}
	return text[at+1:], nil
}
