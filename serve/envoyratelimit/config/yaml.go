package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The document as envoyproxy/ratelimit reads it: YAML 1.1 (gopkg.in/yaml.v2)
// scalars, every mapping key anywhere one of validKeys, lists of mappings
// only, and then the fields it knows decoded, the others ignored.

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
	kindString scalarKind = iota
	kindNull
	kindBool
	kindInt
	kindBigInt // beyond int64: yaml.v2 makes it a uint64 or a float
	kindFloat
)

var yaml11Float = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"true": true, "True": true, "TRUE": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
	"false": false, "False": false, "FALSE": false,
}

// resolve classifies a scalar node as yaml.v2 does; for kindBool it also
// returns the value, for kindInt the number.
func resolve(n *yaml.Node) (scalarKind, bool, int64) {
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return kindString, false, 0
	}
	s := n.Value
	if n.Style&yaml.TaggedStyle != 0 {
		switch n.Tag {
		case "!!str", "!!binary":
			return kindString, false, 0
		case "!!null":
			return kindNull, false, 0
		}
	}
	switch s {
	case "", "~", "null", "Null", "NULL":
		return kindNull, false, 0
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN":
		return kindFloat, false, 0
	}
	if b, ok := yaml11Bools[s]; ok {
		return kindBool, b, 0
	}
	plain := strings.ReplaceAll(s, "_", "")
	if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return kindInt, false, i
	} else if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return kindBigInt, false, 0
	}
	if yaml11Float.MatchString(plain) {
		return kindFloat, false, 0
	}
	return kindString, false, 0
}

func tagOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "!!map"
	case yaml.SequenceNode:
		return "!!seq"
	}
	switch k, _, _ := resolve(n); k {
	case kindNull:
		return "!!null"
	case kindBool:
		return "!!bool"
	case kindInt, kindBigInt:
		return "!!int"
	case kindFloat:
		return "!!float"
	}
	return "!!str"
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// checkKeys is envoyproxy/ratelimit's key validation: every mapping key a
// string among validKeys, lists of mappings only, and leaves that are
// strings, integers, booleans or null.
func checkKeys(m *yaml.Node) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := deref(m.Content[i]), deref(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("error loading config file: yaml: invalid map key: %s", tagOf(k))
		}
		if kind, _, _ := resolve(k); kind != kindString {
			return fmt.Errorf("config error, key is not of type string: %s", describe(k))
		}
		if !validKeys[k.Value] {
			return fmt.Errorf("config error, unknown key '%s'", k.Value)
		}
		switch v.Kind {
		case yaml.SequenceNode:
			for _, e := range v.Content {
				e = deref(e)
				if e.Kind != yaml.MappingNode {
					return fmt.Errorf("config error, yaml file contains list of type other than map: %s", describe(e))
				}
				if err := checkKeys(e); err != nil {
					return err
				}
			}
		case yaml.MappingNode:
			if err := checkKeys(v); err != nil {
				return err
			}
		case yaml.ScalarNode:
			if kind, _, _ := resolve(v); kind == kindFloat || kind == kindBigInt {
				return fmt.Errorf("error checking config")
			}
		}
	}
	return nil
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
	switch k, b, i := resolve(n); k {
	case kindNull:
		return "<nil>"
	case kindBool:
		return strconv.FormatBool(b)
	case kindInt:
		return strconv.FormatInt(i, 10)
	case kindFloat:
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil {
			return fmt.Sprint(f)
		}
	}
	return n.Value
}

// decoder decodes the fields envoyproxy/ratelimit knows, collecting type
// errors as yaml.v2 does.
type decoder struct{ errs []string }

func (d *decoder) fail(n *yaml.Node, into string) {
	v := n.Value
	if n.Kind != yaml.ScalarNode {
		d.errs = append(d.errs, fmt.Sprintf("line %d: cannot unmarshal %s into %s", n.Line, tagOf(n), into))
		return
	}
	d.errs = append(d.errs, fmt.Sprintf("line %d: cannot unmarshal %s `%s` into %s", n.Line, tagOf(n), v, into))
}

func (d *decoder) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	return fmt.Errorf("yaml: unmarshal errors:\n  %s", strings.Join(d.errs, "\n  "))
}

// fields calls set for each key of mapping m, in order: a key given twice
// is set twice, the last value winning, as yaml.v2 decodes it.
func (d *decoder) fields(m *yaml.Node, set func(key string, v *yaml.Node)) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		set(deref(m.Content[i]).Value, deref(m.Content[i+1]))
	}
}

func isNull(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	k, _, _ := resolve(n)
	return k == kindNull
}

func (d *decoder) str(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, "string")
		return ""
	}
	if isNull(n) {
		return ""
	}
	return n.Value
}

func (d *decoder) boolean(n *yaml.Node) bool {
	if n.Kind == yaml.ScalarNode {
		switch k, b, _ := resolve(n); k {
		case kindNull:
			return false
		case kindBool:
			return b
		}
	}
	d.fail(n, "bool")
	return false
}

func (d *decoder) uint32(n *yaml.Node) uint32 {
	if n.Kind == yaml.ScalarNode {
		switch k, _, i := resolve(n); {
		case k == kindNull:
			return 0
		case k == kindInt && i >= 0 && i <= math.MaxUint32:
			return uint32(i)
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
			y.RateLimit = d.rateLimit(v)
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

func (d *decoder) rateLimit(n *yaml.Node) *yamlRateLimit {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, "config.YamlRateLimit")
		return nil
	}
	r := &yamlRateLimit{}
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

// parse reads one file's content as envoyproxy/ratelimit does.
func parse(data []byte) (yamlRoot, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yamlRoot{}, fmt.Errorf("error loading config file: %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return yamlRoot{}, nil
	}
	root := deref(doc.Content[0])
	if isNull(root) {
		return yamlRoot{}, nil
	}
	if root.Kind != yaml.MappingNode {
		var d decoder
		d.fail(root, "map[interface {}]interface {}")
		return yamlRoot{}, fmt.Errorf("error loading config file: %w", d.err())
	}
	if err := checkKeys(root); err != nil {
		return yamlRoot{}, err
	}
	var d decoder
	r := d.root(root)
	if err := d.err(); err != nil {
		return yamlRoot{}, fmt.Errorf("error loading config file: %w", err)
	}
	return r, nil
}
