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

// The document as envoyproxy/ratelimit reads it: YAML 1.1 (gopkg.in/yaml.v2
// v2.4.0) scalars and merge keys, every mapping key anywhere one of
// validKeys, lists of mappings only, and then the fields it knows decoded,
// the others ignored.

// validKeys are the keys envoyproxy/ratelimit accepts at any depth.
var validKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
	"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
	"value_to_metric": true, "share_threshold": true,
}

type yamlRoot struct {
	Domain      string
	Descriptors []yamlDescriptor
}

type yamlDescriptor struct {
	Key, Value     string
	RateLimit      *yamlRateLimit
	Descriptors    []yamlDescriptor
	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	ValueToMetric  bool
	ShareThreshold bool
}

type yamlRateLimit struct {
	RequestsPerUnit uint32
	Unit            string
	Unlimited       bool
	Name            string
	Replaces        []string
}

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

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// isMerge reports whether a key is YAML's merge key "<<" (plain, or
// tagged !!merge; a quoted "<<" is a string).
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Tag == "!!merge"
}

type pair struct{ k, v *yaml.Node } // dereferenced

// mergeSources are the mappings a merge key's value names, in the order
// yaml.v2 applies them: a list from its last to its first, so that the
// first wins.
func mergeSources(v *yaml.Node) []*yaml.Node {
	v = deref(v)
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		out := make([]*yaml.Node, 0, len(v.Content))
		for i := len(v.Content) - 1; i >= 0; i-- {
			if e := deref(v.Content[i]); e.Kind == yaml.MappingNode {
				out = append(out, e)
			}
		}
		return out
	}
	return nil
}

// applied lists the entries of mapping m in the order yaml.v2 sets them:
// a merge key's mappings in its place, then the keys after it. A key may
// come more than once: each later one is set over the earlier.
func applied(m *yaml.Node) []pair {
	var out []pair
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := deref(m.Content[i]), deref(m.Content[i+1])
		if !isMerge(k) {
			out = append(out, pair{k, v})
			continue
		}
		for _, src := range mergeSources(v) {
			out = append(out, applied(src)...)
		}
	}
	return out
}

// keyID identifies a key as a Go map key of yaml.v2's decoding does: by
// its type and value.
func keyID(k *yaml.Node) string {
	if k.Kind != yaml.ScalarNode {
		return "?"
	}
	r := resolve(k)
	return strconv.Itoa(int(r.kind)) + ":" + describe(k)
}

// effective is mapping m as yaml.v2 decodes it into a map, the map its
// key validation walks: each key once, in the place it first came, with
// the value set last.
func effective(m *yaml.Node) []pair {
	var out []pair
	at := map[string]int{}
	for _, p := range applied(m) {
		id := keyID(p.k)
		if i, ok := at[id]; ok {
			out[i].v = p.v
			continue
		}
		at[id] = len(out)
		out = append(out, p)
	}
	return out
}

// prepass finds the errors yaml.v2 stops at while it reads the document
// into a map, before any key is validated: a scalar its tag does not fit,
// a merge key's value that is not a mapping or a list of mappings, a
// mapping or a list as a key. It visits an anchored node where it is
// written, not again at its aliases.
func prepass(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		_, err := resolveScalar(n)
		return err
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if err := prepass(c); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMerge(deref(k)) {
				if err := checkMergeValue(v); err != nil {
					return err
				}
				if err := prepass(v); err != nil {
					return err
				}
				continue
			}
			if err := prepass(k); err != nil {
				return err
			}
			if dk := deref(k); dk.Kind != yaml.ScalarNode {
				return fmt.Errorf("invalid map key: %s", tagOf(dk))
			}
			if err := prepass(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMergeValue: a merge key's value must be a mapping, an alias of
// one, or a list of those (not an alias of a list).
func checkMergeValue(v *yaml.Node) error {
	ok := deref(v).Kind == yaml.MappingNode
	if v.Kind == yaml.SequenceNode {
		ok = true
		for _, e := range v.Content {
			ok = ok && deref(e).Kind == yaml.MappingNode
		}
	}
	if !ok {
		return errors.New("map merge requires map or sequence of maps as the value")
	}
	return nil
}

// checker is envoyproxy/ratelimit's key validation (validateYamlKeys)
// over the document as yaml.v2 decodes it, which also notes the first
// of the mappings Sluice refuses on purpose where theirs does not (see
// written).
type checker struct{ ours error }

// keys checks mapping m: every key a string among validKeys, lists of
// mappings only, and leaves that are strings, integers, booleans or null.
func (c *checker) keys(m *yaml.Node) error {
	c.written(m)
	for _, e := range effective(m) {
		k, v := e.k, e.v
		r := resolve(k)
		if r.kind != kindString {
			return fmt.Errorf("config error, key is not of type string: %s", describe(k))
		}
		if !validKeys[r.s] {
			return fmt.Errorf("config error, unknown key '%s'", r.s)
		}
		switch v.Kind {
		case yaml.SequenceNode:
			for _, e := range v.Content {
				e = deref(e)
				if e.Kind != yaml.MappingNode {
					return fmt.Errorf("config error, yaml file contains list of type other than map: %s", describe(e))
				}
				if err := c.keys(e); err != nil {
					return err
				}
			}
		case yaml.MappingNode:
			if err := c.keys(v); err != nil {
				return err
			}
		case yaml.ScalarNode:
			if kind := resolve(v).kind; kind == kindFloat || kind == kindBigInt {
				return fmt.Errorf("error checking config")
			}
		}
	}
	return nil
}

// written notes (in c.ours, the first only) what Sluice refuses in a
// mapping as written, where yaml.v2 quietly takes one value over another:
//
//   - a key given twice: theirs decodes both into one field (a
//     rate_limit's fields merged, the last winning) and validates only
//     the last one's keys; a duplicate is almost always a mistake.
//   - a merge key after a key its mappings also set: yaml.v2 lets the
//     merged value win, where YAML's merge keys (and yaml.v3) let the
//     mapping's own key win; "<<" first gives both the same answer.
//
// The mappings a merge key names are checked too.
func (c *checker) written(m *yaml.Node) {
	seen := map[string]int{} // keyID -> line
	for i := 0; i+1 < len(m.Content) && c.ours == nil; i += 2 {
		k := deref(m.Content[i])
		if isMerge(k) {
			if line, ok := seen["<<"]; ok {
				c.ours = fmt.Errorf("config error, key '<<' given twice in one mapping, at lines %d and %d: merge a list instead, as <<: [*a, *b]", line, k.Line)
				return
			}
			seen["<<"] = k.Line
			srcs := mergeSources(m.Content[i+1])
			for _, src := range srcs {
				c.written(src)
			}
			for _, src := range srcs {
				for _, e := range applied(src) {
					if line, ok := seen[keyID(e.k)]; ok && c.ours == nil {
						c.ours = fmt.Errorf("config error, the merge key '<<' at line %d sets key '%s' given before it, at line %d, "+
							"which envoyproxy/ratelimit replaces with the merged value: put '<<' first", k.Line, describe(e.k), line)
					}
				}
			}
			continue
		}
		id := keyID(k)
		if line, ok := seen[id]; ok {
			c.ours = fmt.Errorf("config error, key '%s' given twice in one mapping, at lines %d and %d", describe(k), line, k.Line)
			return
		}
		seen[id] = k.Line
	}
}

// describe writes a node as yaml.v2's value of it prints with %v.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.SequenceNode {
		parts := make([]string, len(n.Content))
		for i, c := range n.Content {
			parts[i] = describe(deref(c))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	if n.Kind != yaml.ScalarNode {
		return tagOf(n)
	}
	switch r := resolve(n); r.kind {
	case kindNull:
		return "<nil>"
	case kindBool:
		return strconv.FormatBool(r.b)
	case kindInt:
		return strconv.FormatInt(r.i, 10)
	case kindBigInt:
		return strconv.FormatUint(r.u, 10)
	case kindFloat:
		return fmt.Sprint(r.f)
	default:
		return r.s
	}
}

// decoder decodes the fields envoyproxy/ratelimit knows, collecting type
// errors as yaml.v2 does.
type decoder struct{ errs []string }

func (d *decoder) fail(n *yaml.Node, into string) {
	if n.Kind != yaml.ScalarNode {
		d.errs = append(d.errs, fmt.Sprintf("line %d: cannot unmarshal %s into %s", n.Line, tagOf(n), into))
		return
	}
	v := n.Value
	if len(v) > 10 { // as yaml.v2 shortens it
		v = v[:7] + "..."
	}
	d.errs = append(d.errs, fmt.Sprintf("line %d: cannot unmarshal %s `%s` into %s", n.Line, tagOf(n), v, into))
}

func (d *decoder) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	return fmt.Errorf("yaml: unmarshal errors:\n  %s", strings.Join(d.errs, "\n  "))
}

// fields calls set for each key of mapping m in the order yaml.v2 sets
// them (applied): a merge key's mappings in its place; a key set twice
// is set again over the first, into the same rate_limit.
func (d *decoder) fields(m *yaml.Node, set func(key string, v *yaml.Node)) {
	for _, p := range applied(m) {
		set(resolve(p.k).s, p.v)
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && resolve(n).kind == kindNull
}

func (d *decoder) str(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, "string")
		return ""
	}
	switch r := resolve(n); {
	case r.kind == kindNull:
		return ""
	case r.tag == "!!binary":
		return r.s
	}
	return n.Value // as written: "0x10" stays "0x10"
}

func (d *decoder) boolean(n *yaml.Node) bool {
	if n.Kind == yaml.ScalarNode {
		switch r := resolve(n); r.kind {
		case kindNull:
			return false
		case kindBool:
			return r.b
		}
	}
	d.fail(n, "bool")
	return false
}

func (d *decoder) uint32(n *yaml.Node) uint32 {
	if n.Kind == yaml.ScalarNode {
		switch r := resolve(n); {
		case r.kind == kindNull:
			return 0
		case r.kind == kindInt && r.i >= 0 && r.i <= math.MaxUint32:
			return uint32(r.i)
		case r.kind == kindFloat && r.f >= 0 && r.f < math.MaxUint32+1:
			// Truncated, as yaml.v2 does: only a merged value the
			// mapping's own key replaces gets past the validation.
			return uint32(r.f)
		}
	}
	d.fail(n, "uint32")
	return 0
}

func (d *decoder) root(n *yaml.Node) yamlRoot {
	var r yamlRoot
	d.fields(n, func(k string, v *yaml.Node) {
		switch k {
		case "domain":
			r.Domain = d.str(v)
		case "descriptors":
			r.Descriptors = d.descriptors(v)
		}
	})
	return r
}

func (d *decoder) descriptors(n *yaml.Node) []yamlDescriptor {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, "[]config.YamlDescriptor")
		return nil
	}
	out := make([]yamlDescriptor, 0, len(n.Content))
	for _, e := range n.Content {
		out = append(out, d.descriptor(deref(e)))
	}
	return out
}

func (d *decoder) descriptor(n *yaml.Node) yamlDescriptor {
	var y yamlDescriptor
	d.fields(n, func(k string, v *yaml.Node) {
		switch k {
		case "key":
			y.Key = d.str(v)
		case "value":
			y.Value = d.str(v)
		case "rate_limit":
			y.RateLimit = d.rateLimit(v, y.RateLimit)
		case "descriptors":
			y.Descriptors = d.descriptors(v)
		case "shadow_mode":
			y.ShadowMode = d.boolean(v)
		case "quota_mode":
			y.QuotaMode = d.boolean(v)
		case "detailed_metric":
			y.DetailedMetric = d.boolean(v)
		case "value_to_metric":
			y.ValueToMetric = d.boolean(v)
		case "share_threshold":
			y.ShareThreshold = d.boolean(v)
		}
	})
	return y
}

// rateLimit decodes n into r, as yaml.v2 decodes into the pointer a key
// set before allocated (a merge's), or into a new one.
func (d *decoder) rateLimit(n *yaml.Node, r *yamlRateLimit) *yamlRateLimit {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, "config.YamlRateLimit")
		return r
	}
	if r == nil {
		r = &yamlRateLimit{}
	}
	d.fields(n, func(k string, v *yaml.Node) {
		switch k {
		case "requests_per_unit":
			r.RequestsPerUnit = d.uint32(v)
		case "unit":
			r.Unit = d.str(v)
		case "unlimited":
			r.Unlimited = d.boolean(v)
		case "name":
			r.Name = d.str(v)
		case "replaces":
			if isNull(v) {
				return
			}
			if v.Kind != yaml.SequenceNode {
				d.fail(v, "[]config.yamlReplaces")
				return
			}
			r.Replaces = make([]string, 0, len(v.Content))
			for _, e := range v.Content {
				var name string
				d.fields(deref(e), func(k string, v *yaml.Node) {
					if k == "name" {
						name = d.str(v)
					}
				})
				r.Replaces = append(r.Replaces, name)
			}
		}
	})
	return r
}

// parse reads one file's content as envoyproxy/ratelimit does, then
// refuses what Sluice refuses on purpose (checker.written) in a file
// theirs would load.
func parse(data []byte) (yamlRoot, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yamlRoot{}, fmt.Errorf("error loading config file: %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return yamlRoot{}, nil
	}
	if n := expandedSize(doc.Content[0], map[*yaml.Node]int{}); n > maxExpandedNodes {
		return yamlRoot{}, fmt.Errorf("error loading config file: yaml: document contains excessive aliasing (%d nodes once its aliases are expanded, at most %d)", n, maxExpandedNodes)
	}
	root := deref(doc.Content[0])
	if root.Kind == yaml.MappingNode || root.Kind == yaml.ScalarNode {
		if err := prepass(root); err != nil {
			return yamlRoot{}, fmt.Errorf("error loading config file: yaml: %w", err)
		}
	}
	if isNull(root) {
		return yamlRoot{}, nil
	}
	if root.Kind != yaml.MappingNode {
		var d decoder
		d.fail(root, "map[interface {}]interface {}")
		return yamlRoot{}, fmt.Errorf("error loading config file: %w", d.err())
	}
	var c checker
	if err := c.keys(root); err != nil {
		return yamlRoot{}, err
	}
	var d decoder
	r := d.root(root)
	if err := d.err(); err != nil {
		return yamlRoot{}, fmt.Errorf("error loading config file: %w", err)
	}
	if c.ours != nil {
		return yamlRoot{}, c.ours
	}
	return r, nil
}

// maxExpandedNodes bounds a file's nodes once its aliases are expanded, as
// the walks below expand them: a few lines of nested aliases (a "billion
// laughs") would otherwise make a load take hours. yaml.v2, which
// envoyproxy/ratelimit reads with, refuses such a file too ("excessive
// aliasing"); no rate limit configuration comes near the bound.
const maxExpandedNodes = 1_000_000

// expandedSize counts n's nodes with every alias expanded, in time linear
// in the document's own nodes (memo holds each node's count), saturating
// above maxExpandedNodes.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]int) int {
	if n == nil {
		return 0
	}
	if v, ok := memo[n]; ok {
		return v
	}
	memo[n] = maxExpandedNodes + 1 // a cycle of aliases counts as too many
	size := 1
	if n.Kind == yaml.AliasNode {
		size = expandedSize(n.Alias, memo)
	}
	for _, c := range n.Content {
		size = min(size+expandedSize(c, memo), maxExpandedNodes+1)
	}
	memo[n] = size
	return size
}
