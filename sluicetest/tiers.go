package sluicetest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store/memstore"
)

// MemTier is the pure-Go tier: the scripts' Go twins on an in-process
// store.
func MemTier(t *testing.T) Tier {
	s, err := memstore.New()
	noError(t, err)
	return Tier{
		Name:  "memstore",
		Store: s,
		Get: func(_ context.Context, key string) (string, bool, error) {
			if v, ok := s.Value(key); ok {
				return strconv.FormatInt(v, 10), true, nil
			}
			if v, ok := s.Object(key); ok {
				return fmt.Sprint(v), true, nil
			}
			return "", false, nil
		},
		TTL: func(_ context.Context, key string) (time.Duration, bool, error) {
			d, ok := s.TTL(key)
			return d, ok, nil
		},
	}
}
