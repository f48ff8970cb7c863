package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file resolves YAML scalars as yaml.v2 v2.4.0 (YAML 1.1) does, for
// the decoder in yaml.go.

// scalarKind is what YAML 1.1 (as yaml.v2 resolves it) makes of a scalar.
type scalarKind int

const (
	kindString scalarKind = iota // a timestamp, a !!binary and a custom tag's value included
	kindNull
	kindBool
	kindInt
	kindBigInt // beyond int64: yaml.v2 makes it a uint64
	kindFloat
)

// scalar is what yaml.v2 makes of a scalar node.
type scalar struct {
	kind scalarKind
	// tag is the tag yaml.v2's errors name: the node's own when it has
	// one, else the resolved one (!!str, !!null, !!bool, !!int, !!float,
	// !!timestamp).
	tag string
	b   bool    // kindBool
	i   int64   // kindInt
	u   uint64  // kindBigInt
	f   float64 // kindFloat
	s   string  // kindString: the string (a !!binary decoded)
}

var yaml11Float = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// yaml11Words are the plain scalars yaml.v2 looks up before anything else
// (its resolve map), for a scalar whose first character hints at one.
var yaml11Words = func() map[string]scalar {
	m := map[string]scalar{}
	for _, w := range []string{"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"} {
		m[w] = scalar{kind: kindBool, tag: "!!bool", b: true}
	}
	for _, w := range []string{"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"} {
		m[w] = scalar{kind: kindBool, tag: "!!bool"}
	}
	for _, w := range []string{"", "~", "null", "Null", "NULL"} {
		m[w] = scalar{kind: kindNull, tag: "!!null"}
	}
	for _, w := range []string{".nan", ".NaN", ".NAN"} {
		m[w] = scalar{kind: kindFloat, tag: "!!float", f: math.NaN()}
	}
	for _, w := range []string{".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"} {
		m[w] = scalar{kind: kindFloat, tag: "!!float", f: math.Inf(1)}
	}
	for _, w := range []string{"-.inf", "-.Inf", "-.INF"} {
		m[w] = scalar{kind: kindFloat, tag: "!!float", f: math.Inf(-1)}
	}
	return m
}()

// hint is yaml.v2's guess from a plain scalar's first character: 'D' a
// digit, 'S' a sign, 'M' a letter that starts a word of yaml11Words, '.'
// a dot; 0 for anything else, which is a string (so "_5" is one).
func hint(in string) byte {
	if in == "" {
		return 'M'
	}
	switch c := in[0]; {
	case c >= '0' && c <= '9':
		return 'D'
	case c == '+' || c == '-':
		return 'S'
	case c == '.':
		return '.'
	case strings.IndexByte("yYnNtTfFoO~", c) >= 0:
		return 'M'
	}
	return 0
}

// shortTag writes a tag as yaml.v2's errors do.
func shortTag(tag string) string {
	if rest, ok := strings.CutPrefix(tag, "tag:yaml.org,2002:"); ok {
		return "!!" + rest
	}
	return tag
}

// resolveScalar resolves a scalar node as yaml.v2 does (its resolve and
// decoder.scalar): a quoted one is a string; an explicit tag is honoured
// ("!!str 5" is a string, "!!float 5" a float) and one its value does not
// fit is an error ("!!int 5.5"); otherwise the first character hints at a
// number, a word or a string. The error is yaml.v2's message.
func resolveScalar(n *yaml.Node) (scalar, error) {
	in := n.Value
	tag := ""
	if n.Style&yaml.TaggedStyle != 0 {
		tag = shortTag(n.Tag)
	} else if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return scalar{kind: kindString, tag: "!!str", s: in}, nil
	}
	switch tag {
	case "", "!!str", "!!bool", "!!int", "!!float", "!!null", "!!timestamp":
	case "!!binary":
		data, err := base64.StdEncoding.DecodeString(in)
		if err != nil {
			return scalar{}, errors.New("!!binary value contains invalid base64 data")
		}
		return scalar{kind: kindString, tag: tag, s: string(data)}, nil
	default: // a tag yaml.v2 does not resolve: the value as a string
		return scalar{kind: kindString, tag: tag, s: in}, nil
	}
	r, ok := scalar{}, false
	if h := hint(in); h != 0 && tag != "!!str" {
		r, ok = resolvePlain(in, h, tag)
	}
	if !ok {
		r = scalar{kind: kindString, tag: "!!str", s: in}
	}
	switch tag {
	case "", r.tag, "!!str":
	case "!!float":
		if r.kind != kindInt {
			return scalar{}, fmt.Errorf("cannot decode %s `%s` as a %s", r.tag, in, tag)
		}
		r = scalar{kind: kindFloat, f: float64(r.i)}
	default:
		return scalar{}, fmt.Errorf("cannot decode %s `%s` as a %s", r.tag, in, tag)
	}
	if tag != "" {
		r.tag = tag
	}
	return r, nil
}

// resolvePlain is yaml.v2's resolution of a scalar whose first character
// hints at something other than a string.
func resolvePlain(in string, h byte, tag string) (scalar, bool) {
	if w, ok := yaml11Words[in]; ok {
		return w, true
	}
	switch h {
	case '.':
		if f, err := strconv.ParseFloat(in, 64); err == nil {
			return scalar{kind: kindFloat, tag: "!!float", f: f}, true
		}
	case 'D', 'S':
		if (tag == "" || tag == "!!timestamp") && isTimestamp(in) {
			return scalar{kind: kindString, tag: "!!timestamp", s: in}, true
		}
		// Underscores anywhere but first, in any base: "1_000", "0x_1F".
		plain := strings.ReplaceAll(in, "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return scalar{kind: kindInt, tag: "!!int", i: i}, true
		}
		if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return scalar{kind: kindBigInt, tag: "!!int", u: u}, true
		}
		if yaml11Float.MatchString(plain) {
			if f, err := strconv.ParseFloat(plain, 64); err == nil {
				return scalar{kind: kindFloat, tag: "!!float", f: f}, true
			}
		}
	}
	return scalar{}, false
}

// timestampFormats are those yaml.v2 reads a plain scalar as a timestamp
// by (only after its first four characters are digits and a '-').
var timestampFormats = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

func isTimestamp(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i != 4 || i == len(s) || s[i] != '-' {
		return false
	}
	for _, format := range timestampFormats {
		if _, err := time.Parse(format, s); err == nil {
			return true
		}
	}
	return false
}

// resolve is resolveScalar for a node whose resolution prepass checked.
func resolve(n *yaml.Node) scalar {
	r, _ := resolveScalar(n)
	return r
}

func tagOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "!!map"
	case yaml.SequenceNode:
		return "!!seq"
	}
	return resolve(n).tag
}
