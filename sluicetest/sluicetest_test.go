package sluicetest_test

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetest/builtins"
)

func TestMain(m *testing.M) { builtins.Main(m) }

// TestConformance runs every algorithm's conformance suite on every tier:
// the Go models on memstore, the Lua scripts on miniredis, and on a real
// redis-server through go-redis and through rueidis.
func TestConformance(t *testing.T) { builtins.RunAllTiers(t) }
