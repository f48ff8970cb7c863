// Package prefixstore is a sluice.Store written outside Sluice, on its
// public API alone: it puts a fixed prefix before every key a script is
// given, so that tenants sharing one Redis each have a key space of their
// own, and passes the call to the Store it wraps.
//
// A Store is one method, Run. The prefix holds no brace, so a key's Redis
// Cluster hash tag, and with it its slot, is the same with the prefix as
// without: the keys of one call still share a slot. Keys a script derives
// from the keys it is given (a lease's ledger) carry the prefix too.
package prefixstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
)

// Store prefixes every key and runs the script on the Store it wraps. It
// is safe for concurrent use when the wrapped Store is.
type Store struct {
	next   sluice.Store
	prefix string
}

var _ sluice.Store = (*Store)(nil)

// New returns a Store that runs scripts on next with prefix before every
// key. It refuses a nil next, an empty prefix, and a prefix with a brace
// (it would move keys to other Cluster slots). It does no I/O.
func New(next sluice.Store, prefix string) (*Store, error) {
	switch {
	case next == nil:
		return nil, errors.New("prefixstore: the wrapped store must not be nil")
	case prefix == "":
		return nil, errors.New("prefixstore: the prefix must not be empty")
	case strings.ContainsAny(prefix, "{}"):
		return nil, fmt.Errorf("prefixstore: the prefix %q has a brace, which would change the keys' hash slots", prefix)
	}
	return &Store{next: next, prefix: prefix}, nil
}

// Run runs script on the wrapped Store with every key prefixed. An empty
// key stays empty, so that the script refuses it as it would without the
// prefix.
func (s *Store) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	prefixed := make([]string, len(keys))
	for i, k := range keys {
		if k != "" {
			prefixed[i] = s.prefix + k
		}
	}
	return s.next.Run(ctx, script, prefixed, args)
}

// Prefix returns the prefix the Store puts before every key.
func (s *Store) Prefix() string { return s.prefix }
