// Package goredisstore is a [sluice.Store] over go-redis v9.
//
// It accepts any [redis.Scripter]: *redis.Client, *redis.ClusterClient,
// *redis.Ring and the Sentinel-backed failover clients. Each Run is one
// EVALSHA; when the server answers NOSCRIPT (after a restart, a failover or
// SCRIPT FLUSH) the store sends the script once with EVAL, so a lost script
// cache costs one extra round trip and never an error.
//
// On a *redis.ClusterClient, a call that fails without a reply (the node is
// dead or unreachable) makes the client re-read the slot map, so that after
// a failover the calls reach the promoted replica within a second, not
// after the client's periodic reload (a minute by default).
//
// The store never dials, never closes the caller's client and does no I/O
// in [New]. See docs/failure.md for the client settings that matter to a
// rate limiter (timeouts; MaxRetries, since a retried script can charge a
// request twice; ContextTimeoutEnabled).
package goredisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// Store runs Sluice scripts on a go-redis client. It is safe for concurrent
// use.
type Store struct {
	client redis.Scripter
}

var _ sluice.Store = (*Store)(nil)

// New returns a Store on client. It does no I/O and never closes client.
// It refuses a nil client, including a nil pointer of a client type such
// as (*redis.Client)(nil). It takes no options: the client's own settings
// are the store's (docs/failure.md).
func New(client redis.Scripter) (*Store, error) {
	if ext.IsNil(client) {
		return nil, errors.New("goredisstore: the client must not be nil")
	}
	return &Store{client: client}, nil
}

// Run runs script with EVALSHA, and once with EVAL if the server does not
// have it cached.
func (s *Store) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	wire := script.Args(args)
	argv := make([]any, len(wire))
	for i, a := range wire {
		argv[i] = a
	}
	res, err := s.client.EvalSha(ctx, script.SHA1(), keys, argv...).Result()
	if err != nil && isNoScript(err) {
		res, err = s.client.Eval(ctx, script.Source(), keys, argv...).Result()
	}
	if err != nil {
		if deadline := ext.CallerDeadline(ctx, err); deadline != nil {
			return nil, fmt.Errorf("goredisstore: %w", deadline)
		}
		if cluster, ok := s.client.(*redis.ClusterClient); ok && slotMapMayBeStale(err) {
			// A dead primary sends no MOVED, and without one the client
			// re-reads the slot map only once a minute (its
			// ClusterStateReloadInterval): ask it to re-read now, so that
			// the calls after a failover go to the promoted replica. The
			// reload runs in the background, at most once per 200 ms.
			cluster.ReloadState(ctx)
		}
		return nil, fmt.Errorf("goredisstore: %w", serverError(err))
	}
	return intReplies(res)
}

// Load loads scripts into the server's script cache ahead of the first
// call, so that a pipeline or the first request after start does not pay
// the NOSCRIPT round trip: on a ClusterClient into every primary, on a Ring
// into every shard, on a failover client into the current primary only (a
// failover empties the cache again; Run recovers from that on its own).
func (s *Store) Load(ctx context.Context, scripts ...*sluice.Script) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	for _, sc := range scripts {
		var err error
		if ring, ok := s.client.(*redis.Ring); ok {
			err = ring.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
				return shard.ScriptLoad(ctx, sc.Source()).Err()
			})
		} else {
			err = s.client.ScriptLoad(ctx, sc.Source()).Err()
		}
		if err != nil {
			return fmt.Errorf("goredisstore: load script %s: %w", sc.SHA1(), err)
		}
	}
	return nil
}

// slotMapMayBeStale reports whether err, from a ClusterClient, may mean
// that the node it sent to no longer serves the slot: a network error (no
// reply at all) or a reply saying the cluster is reconfiguring. A reply
// from a live primary, such as a script's error, says nothing about the
// slot map.
func slotMapMayBeStale(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true
	}
	return redis.HasErrorPrefix(err, "CLUSTERDOWN") || redis.HasErrorPrefix(err, "TRYAGAIN")
}

// serverError returns err's error reply as an [ext.ServerError], or err
// when it is no error reply.
func serverError(err error) error {
	var reply redis.Error
	if errors.As(err, &reply) && !errors.Is(err, redis.Nil) {
		return ext.NewServerError(reply.Error())
	}
	return err
}

func isNoScript(err error) bool {
	return redis.HasErrorPrefix(err, "NOSCRIPT")
}

func intReplies(res any) ([]int64, error) {
	if n, ok := res.(int64); ok {
		return []int64{n}, nil // an integer reply: one value (sluice.Store)
	}
	arr, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("goredisstore: %w: reply is %T, want an array", sluice.ErrUnexpectedReply, res)
	}
	out := make([]int64, len(arr))
	for i, v := range arr {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("goredisstore: %w: reply element %d is %T, want an integer", sluice.ErrUnexpectedReply, i, v)
		}
		out[i] = n
	}
	return out, nil
}
