package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

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
	if n := aliasedNodes(doc.Content[0]); n > maxAliasedNodes {
		return yamlRoot{}, fmt.Errorf("error loading config file: yaml: document contains excessive aliasing (its aliases add %d nodes once expanded, at most %d)", min(n, saturated-1), maxAliasedNodes)
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
