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
	text, err := FillSteps(spec, stepFunctionSource)
	if err != nil {
		return "", fmt.Errorf("algorithm: StepFunction: %w", err)
	}
	at := strings.Index(text, "\nfunction(")
	if at < 0 {
		panic("algorithm: step_function.lua has no line that starts with function(")
	}
	return text[at+1:], nil
}

// FillSteps writes spec's steps (Spec.Steps) into template, a script
// or a part of one that decides on them in its own way (multilimit's
// one-pass script): the check, the state check, the step and the expiry
// where the template has a line "-- CHECK", "-- STATE", "-- STEP" or
// "-- EXPIRY", and the parts of state_text.lua (how a state is read,
// kept and written, which hold "-- EXPIRY" lines of their own) where it
// has "-- PARSE", "-- KEEP", "-- WRITE", "-- DEFER" or "-- FLUSH". The
// template must declare the locals the parts read and set
// (state_text.lua and Spec.Steps list them). It returns an error when
// spec is nil or has no Steps, or when the template, its state text
// written in, has none of the four step lines.
func FillSteps(spec *Spec, template string) (string, error) {
	if spec == nil {
		return "", fmt.Errorf("a nil spec")
	}
	if spec.Steps == "" {
		return "", fmt.Errorf("%s is not given as steps", spec.Name)
	}
	check, state, step, expiry := splitSteps(spec)
	text, err := tryFillSteps(template, check, state, step, expiry, false)
	if err != nil {
		return "", fmt.Errorf("the template %w", err)
	}
	return text, nil
}
