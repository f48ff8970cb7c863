package ext

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

// KeySelector chooses the keys a decorator applies to (the hot keys that
// shard splits and lease leases), the same way in every decorator. Its
// zero value selects every key.
type KeySelector struct {
	chosen bool
	keys   map[string]bool   // given keys, exactly
	tags   map[string]bool   // given keys, as sluice.Key escapes a tag
	pred   func(string) bool // or nil
}

// SelectKeys returns a KeySelector of keys and, when pred is not nil, of
// the keys for which pred is true. A request's key is selected when it
// equals a given key, or when its hash tag (what Redis Cluster hashes: the
// text between its first '{' and the first '}' after it, when not empty)
// is a given key as [sluice.Key] escapes a tag: so "tenant:42" selects
// sluice.Key("tenant:42", "api") and every key built with that tag, and
// "tenant:42" itself, but not sluice.Key("tenant:43", "api"). An empty key
// is an error, as is neither keys nor pred.
func SelectKeys(keys []string, pred func(key string) bool) (KeySelector, error) {
	if len(keys) == 0 && pred == nil {
		return KeySelector{}, errors.New("no key and no predicate: select every key with the zero KeySelector")
	}
	s := KeySelector{chosen: true, pred: pred}
	if len(keys) > 0 {
		s.keys = make(map[string]bool, len(keys))
		s.tags = make(map[string]bool, len(keys))
	}
	for i, k := range keys {
		if err := ValidateKey(k); err != nil {
			return KeySelector{}, fmt.Errorf("key %d: %w", i, err)
		}
		s.keys[k] = true
		s.tags[HashTag(sluice.Key(k))] = true
	}
	return s, nil
}

// Selects reports whether s selects key.
func (s KeySelector) Selects(key string) bool {
	switch {
	case !s.chosen, s.keys[key], s.pred != nil && s.pred(key):
		return true
	}
	tag := HashTag(key)
	return tag != "" && s.tags[tag]
}
