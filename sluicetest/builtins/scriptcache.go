package builtins

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// RunScriptCacheLoss checks that losing the server's script cache costs a
// caller no error: SCRIPT FLUSH in a loop under concurrent load, and a
// redis-server restart. newStore builds the store under test on a client
// connected to server; the test owns server and may flush and restart it.
func RunScriptCacheLoss(t *testing.T, newStore func(t *testing.T, server *redistest.RedisServer) sluice.Store) {
	t.Run("SCRIPT FLUSH under load", func(t *testing.T) {
		server := redistest.StartRedis(t)
		l, err := tokenbucket.New(newStore(t, server))
		require.NoError(t, err)
		limit := sluice.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var calls, flushes atomic.Int64
		var errs sync.Map
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				key := sluice.Key("flush", strconv.Itoa(g))
				for ctx.Err() == nil {
					if _, err := l.AllowN(context.WithoutCancel(ctx), key, limit, 1); err != nil {
						errs.Store(err.Error(), true)
					}
					calls.Add(1)
				}
			})
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := server.Do("SCRIPT", "FLUSH")
				if err == nil {
					flushes.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
		wg.Wait()
		errs.Range(func(k, _ any) bool { t.Errorf("caller saw an error: %v", k); return true })
		require.Greater(t, flushes.Load(), int64(10))
		require.Greater(t, calls.Load(), int64(100))
		// The fallback path really ran: EVAL was sent after NOSCRIPT.
		evals, err := server.Info("commandstats", "cmdstat_eval")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(evals, "calls="), evals)
		t.Logf("%d calls, %d SCRIPT FLUSH, eval stats: %s", calls.Load(), flushes.Load(), evals)
	})

	t.Run("server restart", func(t *testing.T) {
		server := redistest.StartRedis(t)
		l, err := tokenbucket.New(newStore(t, server))
		require.NoError(t, err)
		limit := sluice.PerSecond(1000)
		for range 10 {
			_, err := l.AllowN(t.Context(), sluice.Key("restart"), limit, 1)
			require.NoError(t, err)
		}
		require.NoError(t, server.Restart())
		// A fresh server: empty, and with an empty script cache.
		for i := range 100 {
			d, err := l.AllowN(t.Context(), sluice.Key("restart"), limit, 1)
			require.NoError(t, err, "call %d after restart", i)
			require.True(t, d.Allowed)
		}
		evals, err := server.Info("commandstats", "cmdstat_eval")
		require.NoError(t, err)
		require.Contains(t, evals, "calls=1,", "exactly one EVAL after the restart")
	})
}
