package sluice_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

func TestKey(t *testing.T) {
	cases := []struct {
		tag   string
		parts []string
		want  string
	}{
		{"tenant:42", []string{"route", "orders"}, "rl:{tenant:42}:route:orders"},
		{"42", nil, "rl:{42}"},
		{"", nil, "rl:{%}"},
		{"", []string{""}, "rl:{%}:"},
		{"a}b", []string{"x{y"}, "rl:{a%7Db}:x%7By"},
		{"{}", []string{"a:b", "%"}, "rl:{%7B%7D}:a%3Ab:%25"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, sluice.Key(c.tag, c.parts...))
	}
}

// FuzzKey checks, for any user text, that the hash tag Redis extracts is
// exactly the escaped tag (so only the tag picks the slot, and it is never
// empty), and that the key decodes back to its inputs (no two inputs share a
// key).
func FuzzKey(f *testing.F) {
	f.Add("tenant:42", "route", "orders")
	f.Add("", "", "")
	f.Add("{", "}", "{}")
	f.Add("}{", "a:b", "%7B")
	f.Add("\x00\xff", "\n", "rl:{x}")
	f.Fuzz(func(t *testing.T, tag, p1, p2 string) {
		key := sluice.Key(tag, p1, p2)
		require.True(t, strings.HasPrefix(key, sluice.KeyPrefix+":{"))
		open := strings.IndexByte(key, '{')
		end := strings.IndexByte(key[open+1:], '}')
		require.Positive(t, end, "a non-empty hash tag")
		hashTag := key[open+1 : open+1+end]
		require.Equal(t, ext.HashSlot(sluice.Key(tag)), ext.HashSlot(key))
		require.Equal(t, ext.HashSlot(hashTag), ext.HashSlot(key))

		gotTag, gotParts := decodeKey(t, key)
		require.Equal(t, tag, gotTag)
		require.Equal(t, []string{p1, p2}, gotParts)
	})
}

func decodeKey(t *testing.T, key string) (string, []string) {
	rest := strings.TrimPrefix(key, sluice.KeyPrefix+":{")
	end := strings.IndexByte(rest, '}')
	require.GreaterOrEqual(t, end, 0)
	tag := rest[:end]
	if tag == "%" {
		tag = ""
	} else {
		tag = unescape(t, tag)
	}
	var parts []string
	for _, p := range strings.Split(rest[end+1:], ":")[1:] {
		parts = append(parts, unescape(t, p))
	}
	return tag, parts
}

func unescape(t *testing.T, s string) string {
	r := strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}", "%3A", ":")
	out := r.Replace(s)
	require.NotContains(t, strings.NewReplacer("%25", "", "%7B", "", "%7D", "", "%3A", "").Replace(s), "%", "only known escapes")
	return out
}
