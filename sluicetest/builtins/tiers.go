package builtins

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// RunAllTiers runs the conformance suite on every tier of [redistest.AllTiers].
func RunAllTiers(t *testing.T) {
	for _, tier := range redistest.AllTiers() {
		t.Run(tier.Name, func(t *testing.T) { RunConformance(t, tier.Make) })
	}
}
