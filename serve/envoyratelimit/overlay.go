package envoyratelimit

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/stack"
)

// ParseOverlay reads an overlay file: Sluice's stack for rules of an
// envoyproxy/ratelimit configuration, keyed by a rule's name or its stat
// key, so that the configuration's YAML stays byte-identical (its loader
// refuses keys it does not know, so keys written inline would make the
// file one-way). The result is [Options.Overlay].
//
//	rules:
//	  edge.user_id:            # a stat key: the domain, then each level's key or key_value, joined by "."
//	    algorithm: tokenbucket # default: the rule's fixed window
//	    burst: 20              # default: the rule's requests_per_unit
//	  per_user:                # or a rule's name
//	    algorithm: gcra
//	    coalesce: true
//	    fallback: local
//	    replicas: 3
//
// An entry takes every field of a [stack.Spec] but rate, period and cost:
// the limit is the rule's rate_limit, and a request's cost its hits. The
// file is read strictly: an unknown field, a number that is not whole, a
// second document or an entry with no field is an error naming the entry.
// Whether each entry names a limited rule is checked when the service
// loads the configuration with it ([New], [Service.Reload]).
func ParseOverlay(data []byte) (map[string]stack.Spec, error) {
	var root struct {
		Rules yaml.Node `yaml:"rules"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("overlay: the file is empty")
		}
		return nil, fmt.Errorf("overlay: %w", err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return nil, errors.New("overlay: the file holds more than one document")
	}
	if root.Rules.Kind == 0 {
		return nil, errors.New(`overlay: no "rules": give a mapping of rule names or stat keys to stacks`)
	}
	if root.Rules.Kind != yaml.MappingNode {
		return nil, fmt.Errorf(`overlay: line %d: "rules" must be a mapping of rule names or stat keys to stacks`, root.Rules.Line)
	}
	out := map[string]stack.Spec{}
	for i := 0; i+1 < len(root.Rules.Content); i += 2 {
		k, v := root.Rules.Content[i], root.Rules.Content[i+1]
		name := k.Value
		if k.Kind != yaml.ScalarNode || name == "" {
			return nil, fmt.Errorf("overlay: line %d: a rule's name or stat key must be a non-empty string", k.Line)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("overlay: %q (line %d): given twice", name, k.Line)
		}
		if v.Kind != yaml.MappingNode || len(v.Content) == 0 {
			return nil, fmt.Errorf("overlay: %q (line %d): give a mapping of stack fields (algorithm, burst, lease, ...)", name, k.Line)
		}
		for j := 0; j < len(v.Content); j += 2 {
			switch f := v.Content[j].Value; f {
			case "rate", "period", "cost":
				return nil, fmt.Errorf("overlay: %q: %s: the limit is the rule's rate_limit and the cost its hits; the overlay chooses how they are enforced", name, f)
			}
		}
		if err := stack.CheckYAML(v); err != nil {
			return nil, fmt.Errorf("overlay: %q: %w", name, err)
		}
		var spec stack.Spec
		if err := decodeStrict(v, &spec); err != nil {
			return nil, fmt.Errorf("overlay: %q: %w", name, err)
		}
		out[name] = spec
	}
	if len(out) == 0 {
		return nil, errors.New("overlay: \"rules\" is empty")
	}
	return out, nil
}

// decodeStrict decodes node into v, refusing fields v does not have.
func decodeStrict(node *yaml.Node, v any) error {
	data, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(v)
}
