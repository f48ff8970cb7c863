package sluice

import "strings"

// KeyPrefix starts every key built by [Key].
const KeyPrefix = "rl"

// Key builds a Redis key from a hash-tag part and further parts, in the form
//
//	rl:{tag}:part1:part2
//
// for example Key("tenant:42", "route", "orders") is
// "rl:{tenant:42}:route:orders". Every key built with the same tag hashes to
// the same Redis Cluster slot, and only the tag picks the slot.
//
// All of it is user-supplied text, so it is escaped: '%', '{' and '}' become
// %25, %7B and %7D everywhere, and ':' becomes %3A in the parts after the
// tag. Text containing braces therefore cannot end the hash tag early or
// start another one, and the ':' separators stay unambiguous (two different
// inputs never build the same key). An empty
// tag is written as a lone "%", which no escaped text can produce, so that it
// still forms a non-empty hash tag (Redis ignores an empty "{}" tag and hashes
// the whole key, which would scatter one tenant's keys over slots).
func Key(tag string, parts ...string) string {
	var b strings.Builder
	n := len(KeyPrefix) + 4 + len(tag)
	for _, p := range parts {
		n += 1 + len(p)
	}
	b.Grow(n)
	b.WriteString(KeyPrefix)
	b.WriteString(":{")
	if tag == "" {
		b.WriteByte('%')
	} else {
		escapeKeyPart(&b, tag, false)
	}
	b.WriteByte('}')
	for _, p := range parts {
		b.WriteByte(':')
		escapeKeyPart(&b, p, true)
	}
	return b.String()
}

func escapeKeyPart(b *strings.Builder, s string, escapeColon bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		case ':':
			if escapeColon {
				b.WriteString("%3A")
			} else {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
}
