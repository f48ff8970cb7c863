// Package rueidisstore is a [sluice.Store] over rueidis.
//
// It accepts any [rueidis.Client]: single node, Cluster and Sentinel. Each
// Run is one EVALSHA sent with Do, so rueidis's auto-pipelining batches
// concurrent decisions onto shared connections; when the server answers
// NOSCRIPT the store sends the script once with EVAL, so a lost script cache
// costs one extra round trip and never an error.
//
// A connection the server closed (a restart, its idle timeout) is found
// closed only when the next command goes out on it: the store then sends
// the script again on a fresh connection, so that a restart costs no error.
// If the server died after running the script and is back before the
// resend, the request is charged twice: the limit gets tighter, never
// looser. Any other error, a timeout included, is returned as it is.
//
// On a Cluster client the keys of one Run must share a slot; the store
// checks this and returns [ErrCrossSlot] instead of letting the command
// builder panic. Single-node and Sentinel clients take any keys. The store
// never dials, never closes the caller's client and does no I/O in [New].
package rueidisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// Store runs Sluice scripts on a rueidis client. It is safe for concurrent
// use.
type Store struct {
	client rueidis.Client
	// slotted says the client's command builder refuses keys of different
	// slots (a Cluster client): Run then checks them first.
	slotted bool
}

var _ sluice.Store = (*Store)(nil)

// ErrCrossSlot is returned when the keys of one Run hash to different Redis
// Cluster slots; build keys that belong together with [sluice.Key] and one
// tag.
// It wraps [sluice.ErrCrossSlot].
var ErrCrossSlot = fmt.Errorf("rueidisstore: %w", sluice.ErrCrossSlot)

// New returns a Store on client. It does no I/O and never closes client.
// It refuses a nil client, including an interface holding a nil pointer.
// It takes no options: the client's own settings are the store's.
func New(client rueidis.Client) (*Store, error) {
	if ext.IsNil(client) {
		return nil, errors.New("rueidisstore: the client must not be nil")
	}
	return &Store{client: client, slotted: checksSlots(client)}, nil
}

// Run runs script with EVALSHA, and once with EVAL if the server does not
// have it cached. A call that went out on a connection the server had
// closed is sent again, on a fresh connection (see the package doc).
func (s *Store) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	if s.slotted {
		for _, k := range keys[min(1, len(keys)):] {
			if ext.HashSlot(k) != ext.HashSlot(keys[0]) {
				return nil, ErrCrossSlot
			}
		}
	}
	argv := script.Args(args)
	res := s.run(ctx, script, keys, argv)
	for range maxResends {
		if !closedBeforeReply(res.Error()) || ctx.Err() != nil {
			break
		}
		res = s.run(ctx, script, keys, argv)
	}
	if err := res.Error(); err != nil {
		if deadline := ext.CallerDeadline(ctx, err); deadline != nil {
			return nil, fmt.Errorf("rueidisstore: %w", deadline)
		}
		if reply, ok := rueidis.IsRedisErr(err); ok {
			return nil, fmt.Errorf("rueidisstore: %w", ext.NewServerError(reply.Error()))
		}
		return nil, fmt.Errorf("rueidisstore: %w", err)
	}
	if n, err := res.AsInt64(); err == nil {
		return []int64{n}, nil // an integer reply: one value (sluice.Store)
	}
	arr, err := res.ToArray()
	if err != nil {
		return nil, fmt.Errorf("rueidisstore: %w: %w", sluice.ErrUnexpectedReply, err)
	}
	out := make([]int64, len(arr))
	for i := range arr {
		n, err := arr[i].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("rueidisstore: %w: reply element %d: %w", sluice.ErrUnexpectedReply, i, err)
		}
		out[i] = n
	}
	return out, nil
}

// maxResends bounds the resends of one Run on connections found closed: a
// client multiplexes several connections, and each one opened before a
// restart fails once before it is replaced.
const maxResends = 8

// run sends script with EVALSHA, and with EVAL if the server does not have
// it cached.
func (s *Store) run(ctx context.Context, script *sluice.Script, keys, argv []string) rueidis.RedisResult {
	b := s.client.B()
	res := s.client.Do(ctx, b.Evalsha().Sha1(script.SHA1()).Numkeys(int64(len(keys))).Key(keys...).Arg(argv...).Build())
	if rerr, ok := rueidis.IsRedisErr(res.Error()); ok && rerr.IsNoScript() {
		res = s.client.Do(ctx, b.Eval().Script(script.Source()).Numkeys(int64(len(keys))).Key(keys...).Arg(argv...).Build())
	}
	return res
}

// closedBeforeReply reports whether err says the connection was closed by
// the server (EOF, reset, broken pipe) rather than that the server answered
// or the call timed out. When calls come one at a time, rueidis reads a
// connection only when it sends on it, so a connection to a server that
// restarted, or that closed it as idle, fails with EOF on its next use: the
// command went to the old process, which never ran it.
func closedBeforeReply(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Load loads scripts into the script cache of every node the client knows,
// so that the first request after start does not pay the NOSCRIPT round
// trip.
func (s *Store) Load(ctx context.Context, scripts ...*sluice.Script) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	for _, sc := range scripts {
		for addr, node := range s.client.Nodes() {
			if err := node.Do(ctx, node.B().ScriptLoad().Script(sc.Source()).Build()).Error(); err != nil {
				return fmt.Errorf("rueidisstore: load script %s on %s: %w", sc.SHA1(), addr, err)
			}
		}
	}
	return nil
}

// checksSlots reports whether c's command builder panics on keys of
// different slots, as a Cluster client's does. It builds one command and
// never sends it: no I/O.
func checksSlots(c rueidis.Client) (checks bool) {
	defer func() {
		if recover() != nil {
			checks = true
		}
	}()
	c.B().Mget().Key("{a}", "{b}").Build()
	return false
}
