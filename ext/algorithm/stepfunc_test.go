package algorithm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext/algorithm"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/embedded"
)

// TestStepFunction: an algorithm given as steps becomes a function that
// decides dry without writing and then, on what it read, for real; any
// other spec is an error.
func TestStepFunction(t *testing.T) {
	_, err := algorithm.StepFunction(nil)
	require.ErrorContains(t, err, "a nil spec")
	_ = fixedwindow.Script()
	_, err = algorithm.StepFunction(algorithm.Registered("fixedwindow"))
	require.ErrorContains(t, err, "fixedwindow is not given as steps")

	_ = tokenbucket.Script()
	fn, err := algorithm.StepFunction(algorithm.Registered("tokenbucket"))
	require.NoError(t, err)
	// A burst of 2 at 1/s: dry, then for real, twice, then a denial.
	script := sluice.NewScript(algorithm.Lib()+`
local server_clock = false
local f = `+fn+`
local key, now, out = KEYS[1], 1000000000000000, {}
for i = 1, 3 do
  local fail, allowed, remaining, retry_after, reset_after, raw = f(key, nil, 1, 1000000, 2, 1, now, true)
  if fail then return redis.error_reply(fail) end
  out[#out + 1] = allowed
  out[#out + 1] = redis.call('EXISTS', key) -- dry wrote nothing
  if allowed == 1 then
    fail, allowed = f(key, raw, 1, 1000000, 2, 1, now, false)
    out[#out + 1] = allowed
  end
end
return out`, nil)
	emb, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = emb.Close() })
	for name, store := range map[string]sluice.Store{
		"embedded": emb,
		"redis":    redistest.GoRedisTier(t, redistest.SharedRedis(t)).Store,
	} {
		key := sluice.Key("stepfunction", name) + ":tb"
		got, err := store.Run(t.Context(), script, []string{key}, nil)
		require.NoError(t, err, name)
		require.Equal(t, []int64{1, 0, 1, 1, 1, 1, 0, 1}, got, name)
	}
}

// TestFillSteps: a template gets an algorithm's steps and the state text
// where its lines stand; a spec that is not given as steps, or a template
// with none of the step lines, is an error.
func TestFillSteps(t *testing.T) {
	_ = tokenbucket.Script()
	tb := algorithm.Registered("tokenbucket")
	text, err := algorithm.FillSteps(tb, "\n-- CHECK\nlocal x = 1\n-- WRITE\n")
	require.NoError(t, err)
	require.Contains(t, text, "SLUICE_COST_EXCEEDS_BURST", "the check")
	require.Contains(t, text, "redis.call('SETRANGE', wkey, '0', format('0x%014x', state))", "the state text's write")
	require.Contains(t, text, "expiry_us = state", "the expiry, within the write")
	require.NotContains(t, text, "-- CHECK\n")
	require.NotContains(t, text, "-- EXPIRY\n")

	_, err = algorithm.FillSteps(nil, "\n-- CHECK\n")
	require.ErrorContains(t, err, "a nil spec")
	_ = fixedwindow.Script()
	_, err = algorithm.FillSteps(algorithm.Registered("fixedwindow"), "\n-- CHECK\n")
	require.ErrorContains(t, err, "fixedwindow is not given as steps")
	_, err = algorithm.FillSteps(tb, "return 1\n")
	require.ErrorContains(t, err, "has none of the lines")
	_, err = algorithm.FillSteps(tb, "\nlocal sets, nsets = {}, 0\n-- STEP\n-- DEFER\n")
	require.ErrorContains(t, err, "does not declare DEFER's locals", "a template that would read an undeclared global")
	_, err = algorithm.FillSteps(tb, "\nlocal sets, nsets, ats, last_at, last_text, last_state, last_state_text = {}, 0, {}\n-- STEP\n-- DEFER\n")
	require.NoError(t, err)
}

// TestNewScriptPacksUnlessTheBodyReadsARGV: a decision script's numbers
// go packed into one argument, unless its body reads ARGV or calls
// int_arg (outside a comment), which then reads them one per argument,
// as before packing: on Redis and the embedded store.
func TestNewScriptPacksUnlessTheBodyReadsARGV(t *testing.T) {
	decide := func(sluice.LocalTx, algorithm.Args, bool) ([]int64, error) { return nil, nil }
	args := []int64{10, 1_000_000, 10, 3}
	reads := map[string]string{
		"ARGV":    "return {1, tonumber(ARGV[4]), 0, 0}",
		"int_arg": "return {1, int_arg(4, 0, 10), 0, 0}",
	}
	for name, body := range reads {
		require.Len(t, algorithm.NewScript(body, decide).Args(args), 4, "%s: one per argument", name)
	}
	require.Len(t, algorithm.NewScript("-- not ARGV\nreturn {1, cost, 0, 0}", decide).Args(args), 1, "packed")
	emb, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = emb.Close() })
	for server, store := range map[string]sluice.Store{"redis": redistest.GoRedisTier(t, redistest.SharedRedis(t)).Store, "embedded": emb} {
		for name, body := range reads {
			reply, err := store.Run(t.Context(), algorithm.NewScript(body, decide), []string{"{argv}:" + name}, args)
			require.NoError(t, err, "%s/%s", server, name)
			require.Equal(t, []int64{1, 3, 0, 0}, reply, "%s/%s reads the cost", server, name)
		}
	}
}

// TestLibForDefinesIntArgForASourceThatCallsIt: a script gets int_arg, a
// function defined on every call, only when it names it outside a
// comment; the bounds always.
func TestLibForDefinesIntArgForASourceThatCallsIt(t *testing.T) {
	with := algorithm.LibFor("local n = int_arg(1, 0, 10)\n")
	require.Equal(t, algorithm.Lib(), with)
	require.Contains(t, with, "local function int_arg(")
	require.Equal(t, algorithm.Lib(), algorithm.LibFor("local f = int_arg\nreturn f (1, 0, 10)\n"), "named, not called in place")
	require.Equal(t, algorithm.Lib(), algorithm.LibFor("return int_arg (1, 0, 10) -- a call\n"))
	without := algorithm.LibFor("-- written out rather than through int_arg\nreturn 1\n")
	require.NotContains(t, without, "int_arg(")
	require.Contains(t, without, "local MAX_NOW_US")
	require.Contains(t, without, "local MAX_FILL_US")
	for name, source := range map[string]string{
		"tokenbucket": tokenbucket.Script().Source(),
		"lease":       algorithm.LeaseScript.Source(),
	} {
		require.NotContains(t, source, "int_arg(", "%s does not call it", name)
	}
}
