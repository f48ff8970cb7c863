package sluicetest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// documentedClients builds each store on a client configured as
// docs/failure.md recommends.
var documentedClients = []struct {
	name     string
	newStore func(t *testing.T, addr string) sluice.Store
}{
	{"go-redis", func(t *testing.T, addr string) sluice.Store {
		c := redis.NewClient(&redis.Options{
			Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond,
		})
		t.Cleanup(func() { _ = c.Close() })
		s, err := goredisstore.New(c)
		require.NoError(t, err)
		return s
	}},
	{"rueidis", func(t *testing.T, addr string) sluice.Store {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{addr}, DisableCache: true, ConnWriteTimeout: 50 * time.Millisecond,
		})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		s, err := rueidisstore.New(c)
		require.NoError(t, err)
		return s
	}},
}

// decideFrom calls l from callers goroutines, calls times each, and returns
// the errors.
func decideFrom(l sluice.Limiter, key string, callers, calls int) []string {
	var (
		mu   sync.Mutex
		errs []string
		wg   sync.WaitGroup
	)
	for g := range callers {
		wg.Go(func() {
			for i := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				_, err := l.AllowN(ctx, key, sluice.PerSecond(1_000_000), 1)
				cancel()
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("caller %d, call %d: %v", g, i, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// TestARestartCostsNoError: once a restarted server answers again, the
// first calls on every connection opened before the restart are decided,
// not errors, through both clients at their documented settings, whether
// the calls come one at a time (rueidis then reads a connection only when
// it sends, and used to return EOF on each) or concurrently. A server that
// closes idle connections (its timeout setting) costs no error either.
func TestARestartCostsNoError(t *testing.T) {
	for _, client := range documentedClients {
		t.Run(client.name, func(t *testing.T) {
			for _, callers := range []int{1, 8} {
				t.Run(fmt.Sprintf("restart/callers=%d", callers), func(t *testing.T) {
					server := redistest.StartRedis(t)
					l, err := tokenbucket.New(client.newStore(t, server.Addr()))
					require.NoError(t, err)
					key := sluicetest.UniqueKey(t)
					require.Empty(t, decideFrom(l, key, callers, 5), "before the restart")
					server.Kill()
					require.NoError(t, server.Restart())
					require.Empty(t, decideFrom(l, key, callers, 5), "the first calls after the restart")
				})
			}
			t.Run("idle connections closed by the server", func(t *testing.T) {
				t.Parallel()
				server := redistest.StartRedis(t, "--timeout", "1")
				l, err := tokenbucket.New(client.newStore(t, server.Addr()))
				require.NoError(t, err)
				key := sluicetest.UniqueKey(t)
				require.Empty(t, decideFrom(l, key, 4, 5), "before the connections idle")
				time.Sleep(2500 * time.Millisecond) // the server closes clients idle for over 1 s
				require.Empty(t, decideFrom(l, key, 1, 5), "after the server closed the idle connections")
			})
		})
	}
}

// TestATimedOutCallIsNotSentTwice: a call whose deadline passes while the
// server is stalled returns an error, and is not sent again, through both
// clients: once the server resumes it runs the script at most once (once
// through go-redis; through rueidis, which closes the connection, sometimes
// not at all). A timed-out call may have been charged, and a resend would
// charge it twice.
func TestATimedOutCallIsNotSentTwice(t *testing.T) {
	for _, client := range documentedClients {
		t.Run(client.name, func(t *testing.T) {
			server := redistest.StartRedis(t)
			store := client.newStore(t, server.Addr())
			l, err := tokenbucket.New(store)
			require.NoError(t, err)
			key := sluicetest.UniqueKey(t)
			require.NoError(t, store.(interface {
				Load(context.Context, ...*sluice.Script) error
			}).Load(t.Context(), tokenbucket.Script()))
			_, err = server.Do("CONFIG", "RESETSTAT")
			require.NoError(t, err)

			server.Stall()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err = l.AllowN(ctx, key, sluice.PerSecond(1000), 1)
			cancel()
			require.Error(t, err, "the call timed out")
			time.Sleep(100 * time.Millisecond) // time for a resend, if there were one
			server.Resume()

			time.Sleep(time.Second) // time to run what was sent, and any resend
			calls := "calls=0,"
			if stats, err := server.Info("commandstats", "cmdstat_evalsha"); err == nil {
				calls = stats
			}
			require.True(t, strings.HasPrefix(calls, "calls=0,") || strings.HasPrefix(calls, "calls=1,"),
				"the server ran the timed-out call at most once: %s", calls)
			_, err = server.Info("commandstats", "cmdstat_eval")
			require.Error(t, err, "and never with EVAL")
			t.Logf("EVALSHA %s", calls)
		})
	}
}
