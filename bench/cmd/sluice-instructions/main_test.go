package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsers(t *testing.T) {
	n, err := evalshaCalls("# Commandstats\r\ncmdstat_ping:calls=3,usec=1\r\ncmdstat_evalsha:calls=2001,usec=9,usec_per_call=0.1\r\n")
	require.NoError(t, err)
	require.EqualValues(t, 2001, n)
	_, err = evalshaCalls("cmdstat_ping:calls=3\r\n")
	require.ErrorContains(t, err, "no EVALSHA")

	c, err := collectedOf("==123== Events    : Ir\n==123== Collected : 24958590\n==123==\n")
	require.NoError(t, err)
	require.EqualValues(t, 24958590, c)
	_, err = collectedOf("nothing")
	require.ErrorContains(t, err, "Collected")
}

func TestCasesAreNamedOnceWithTheirCeilings(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range cases() {
		require.False(t, seen[c.name], c.name)
		seen[c.name] = true
		switch {
		case strings.Contains(c.name, "on one key"):
			require.EqualValues(t, targetHotBatch, c.target, c.name)
			require.Equal(t, 16, c.perCall)
		case strings.Contains(c.name, "16 keys"):
			require.EqualValues(t, targetKeyBatch, c.target, c.name)
			require.Equal(t, 16, c.perCall)
		}
	}
	require.True(t, seen["tokenbucket"] && seen["go-redis/redis_rate v10"] && seen["multilimit, 1 limit"] && seen["tokenbucket lease"])
}

// TestMeasure runs two cases under valgrind for real: EVALSHA's own cost
// and one algorithm, through the API. Instruction counts repeat, so the
// token bucket costs more than an empty script, and both are counted
// over every call made.
func TestMeasure(t *testing.T) {
	for _, tool := range []string{"valgrind", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("SLUICE_REQUIRE_REDIS") == "1" {
				t.Fatalf("%s not on PATH", tool)
			}
			t.Skipf("%s not on PATH", tool)
		}
	}
	byName := map[string]testCase{}
	for _, c := range cases() {
		byName[c.name] = c
	}
	empty, err := measure(context.Background(), byName["EVALSHA of return 1"], 32)
	require.NoError(t, err)
	tb, err := measure(context.Background(), byName["tokenbucket"], 32)
	require.NoError(t, err)
	require.EqualValues(t, 32, empty.Calls)
	require.EqualValues(t, 32, tb.Calls)
	require.Greater(t, empty.PerDecision, int64(1000))
	require.Greater(t, tb.PerDecision, 2*empty.PerDecision)
	t.Logf("return 1: %d, tokenbucket: %d instructions per decision", empty.PerDecision, tb.PerDecision)
}

func TestBodyCase(t *testing.T) {
	path := t.TempDir() + "/scratch.lua"
	require.NoError(t, os.WriteFile(path, []byte("return 1"), 0o644))
	c, err := bodyCase(path, "1000000, 1000000,0xe8d4a51000,1", true)
	require.NoError(t, err)
	require.Equal(t, "body scratch.lua, a new key every call", c.name)
	require.Equal(t, 1, c.perCall)
	_, err = bodyCase(path, "1,x", false)
	require.ErrorContains(t, err, "-args")
	_, err = bodyCase(path+".missing", "1", false)
	require.Error(t, err)
}
