// Package embedded is Sluice's zero-setup default: it starts an in-process
// Redis (miniredis) on a loopback port and returns a [sluice.Store] on it.
//
// The scripts run as Lua, exactly as they would on Redis, so an application
// can start on the embedded store and move to a real Redis by changing one
// line. It is meant for demos, examples, tests and single-process services:
// state lives in the process's memory and is lost when it exits, and
// miniredis runs gopher-lua rather than Redis's own Lua, so it is never proof
// of behaviour on a real server (the real-Redis test tier is).
//
// miniredis only counts TTLs down when told to, so the store runs one
// goroutine that moves them with the wall clock every 100 ms; keys expire
// as on Redis, within that resolution. [Store.Close] stops it.
package embedded

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// Store is a [sluice.Store] on an in-process miniredis. Close it to stop
// the server.
type Store struct {
	server *miniredis.Miniredis
	client *redis.Client
	store  *goredisstore.Store

	stop      chan struct{}
	stopped   sync.WaitGroup
	closeOnce sync.Once
	mu        sync.Mutex
	lastTick  time.Time // when TTLs were last moved
}

const expireEvery = 100 * time.Millisecond

var _ sluice.Store = (*Store)(nil)

// Start starts a miniredis on a free loopback port and returns a Store on
// it. Unlike other constructors it does I/O, hence the name.
func Start() (*Store, error) { return start(true) }

// start is Start; without ticking, TTLs move only when moveTTLs is called
// (for tests that move them by hand).
func start(ticking bool) (*Store, error) {
	server := miniredis.NewMiniRedis()
	if err := server.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded: start miniredis: %w", err)
	}
	client := redis.NewClient(&redis.Options{
		Addr:       server.Addr(),
		MaxRetries: -1, // a retried script could charge twice
	})
	store, err := goredisstore.New(client)
	if err != nil {
		_ = client.Close()
		server.Close()
		return nil, fmt.Errorf("embedded: %w", err)
	}
	s := &Store{
		server:   server,
		client:   client,
		store:    store,
		stop:     make(chan struct{}),
		lastTick: time.Now(),
	}
	if !ticking {
		return s, nil
	}
	s.stopped.Go(func() {
		t := time.NewTicker(expireEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case now := <-t.C:
				s.moveTTLs(now)
			}
		}
	})
	return s, nil
}

// moveTTLs counts every TTL down by the time since the last call, which
// expires the keys whose time has come.
func (s *Store) moveTTLs(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if elapsed := now.Sub(s.lastTick); elapsed > 0 {
		s.server.FastForward(elapsed)
		s.lastTick = now
	}
}

// Run runs script on the embedded server.
func (s *Store) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	return s.store.Run(ctx, script, keys, args)
}

// Addr returns the embedded server's address, for a redis-cli or a second
// client.
func (s *Store) Addr() string { return s.server.Addr() }

// Server returns the miniredis instance, for tests that inspect keys or move
// its clock.
func (s *Store) Server() *miniredis.Miniredis { return s.server }

// Close stops the TTL goroutine, closes the client and stops the server.
// It is safe to call more than once.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.stopped.Wait()
		err = s.client.Close()
		s.server.Close()
	})
	if err != nil {
		return fmt.Errorf("embedded: close client: %w", err)
	}
	return nil
}
