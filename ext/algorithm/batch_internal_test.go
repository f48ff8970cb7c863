package algorithm

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/store/embedded"
)

// The batch cache serves repeated keys; a body using a form of SET or DEL
// it cannot serve, or redis.pcall, must fail loudly there (error code 6
// for its requests), not be answered from memory as if it had run. A key
// that appears once runs the body on redis itself, where the form works.
func TestBatchCacheRefusesWhatItCannotServe(t *testing.T) {
	store, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	for name, body := range map[string]string{
		"SET NX":      "redis.call('SET', key, '1', 'NX') return {1, 0, 0, 0}",
		"SET EX":      "redis.call('SET', key, '1', 'EX', '10') return {1, 0, 0, 0}",
		"DEL two":     "redis.call('DEL', key, key .. 'x') return {1, 0, 0, 0}",
		"redis.pcall": "redis.pcall('GET', key) return {1, 0, 0, 0}",
	} {
		t.Run(name, func(t *testing.T) {
			script := newBatchScript(&Spec{Name: "probe", Body: body})
			shape := [4]int64{10, 1_000_000, 10, 1}
			keys, args, _ := encodeBatch([]string{"{p}:rep", "{p}:rep", "{p}:once"}, [][4]int64{shape, shape, shape})
			require.Equal(t, []string{"{p}:rep", "{p}:once"}, keys)
			require.Equal(t, []int64{3*512 + 1, 10, 1_000_000, 10, 1, 0, 0, 256}, args, "each key and shape once, a reference per request")
			reply, err := store.Run(context.Background(), script, keys, args)
			require.NoError(t, err)
			require.Equal(t, []int64{-batchOther, -batchOther, 1, 0}, reply,
				"the repeated key's requests fail, the single key's runs on redis (allowed, 0 remaining, reset 0)")
		})
	}
}

// Each batch error code maps to the sentinel AllowN's error would wrap,
// and back from the script's message; an unknown code is an unexpected
// reply.
func TestBatchErrorCodes(t *testing.T) {
	l := &Limiter{spec: &Spec{Name: "probe"}}
	for _, c := range []struct {
		code     int64
		message  string
		sentinel error
	}{
		{batchInvalidLimit, "SLUICE_INVALID_LIMIT x", sluice.ErrInvalidLimit},
		{batchInvalidCost, "SLUICE_INVALID_COST x", sluice.ErrInvalidCost},
		{batchCostExceedsBurst, "SLUICE_COST_EXCEEDS_BURST x", sluice.ErrCostExceedsBurst},
		{batchInvalidKey, "SLUICE_INVALID_KEY x", sluice.ErrInvalidKey},
		{batchInvalidState, "SLUICE_INVALID_STATE x", sluice.ErrKeyConflict},
		{batchInvalidState, "WRONGTYPE Operation against a key holding the wrong kind of value", sluice.ErrKeyConflict},
		{batchOther, "ERR something else", sluice.ErrUnexpectedReply},
	} {
		require.Equal(t, c.code, batchErrorCode(ext.NewServerError(c.message)), c.message)
		require.ErrorIs(t, l.batchError(c.code), c.sentinel, c.message)
	}
	require.ErrorIs(t, l.batchError(batchCostExceedsBurst), sluice.ErrInvalidCost, "as AllowN's error does")
}

// A step batch's figures, and a Steps algorithm's single decision's,
// come from the Go twin, replayed from the states the script read; where
// the twin's allowed is not the script's for a request, AllowBatch and
// AllowN fail with ErrUnexpectedReply rather than answer with the twin's
// word. Here the script denies everything and the twin allows
// everything; with an honest twin the same requests are decided.
func TestStepBatchRefusesATwinThatDisagrees(t *testing.T) {
	store, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	newSpec := func(twinAllows int64) *Spec {
		spec := &Spec{
			Name:           "liar",
			Steps:          "local unused = 1\n-- state\nlocal unused_too = 1\n-- step\nallowed = 0\n-- expiry\nexpiry_us = state\n",
			Capacity:       func(l sluice.Limit) int64 { return l.Burst },
			MaxReplyMicros: time.Hour.Microseconds(),
			Decide: func(sluice.LocalTx, Args, bool) ([]int64, error) {
				return []int64{twinAllows, 0, (1 - twinAllows) * 1000, 0}, nil // a denial says when to retry
			},
		}
		check, state, step, expiry := splitSteps(spec)
		spec.Body = fillSteps(stepTemplate(false), check, state, step, expiry)
		spec.Script = newStepScript(spec, fillSteps(stepTemplate(true), check, state, step, expiry))
		spec.BatchScript = newStepBatchScript(spec, check, state, step, expiry)
		return spec
	}
	reqs := []sluice.Request{{Key: "{s}:a", Limit: sluice.PerSecond(5), N: 1}, {Key: "{s}:a", Limit: sluice.PerSecond(5), N: 1}}
	liar, err := New(newSpec(1), store)
	require.NoError(t, err)
	_, err = liar.AllowBatch(context.Background(), reqs)
	require.ErrorIs(t, err, sluice.ErrUnexpectedReply)
	require.ErrorContains(t, err, "disagree")
	_, err = liar.AllowN(context.Background(), "{s}:b", sluice.PerSecond(5), 1)
	require.ErrorIs(t, err, sluice.ErrUnexpectedReply, "the single decision too")
	require.ErrorContains(t, err, "disagree")

	honest, err := New(newSpec(0), store)
	require.NoError(t, err)
	results, err := honest.AllowBatch(context.Background(), reqs)
	require.NoError(t, err)
	for _, r := range results {
		require.NoError(t, r.Err)
		require.False(t, r.Decision.Allowed)
	}
	d, err := honest.AllowN(context.Background(), "{s}:b", sluice.PerSecond(5), 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
}
