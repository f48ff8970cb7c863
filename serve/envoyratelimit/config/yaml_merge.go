package config

import (
	"errors"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// This file follows aliases and YAML merge keys (<<) as yaml.v2 v2.4.0
// reads them, for the decoder in yaml.go, and bounds a document's size
// once its aliases are expanded.

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

// maxAliasedNodes bounds the nodes a file's aliases add once expanded, as
// the walks below expand them: a few lines of nested aliases (a "billion
// laughs") would otherwise make a load take hours. yaml.v2, which
// envoyproxy/ratelimit reads with, refuses such a file too ("excessive
// aliasing"). Nodes written out count for nothing, so a large file
// without aliases loads whatever its size.
const maxAliasedNodes = 1_000_000

// aliasedNodes is how many nodes n's aliases add once expanded: its
// expanded size less its own nodes, counted in time linear in its own
// nodes (each node's expanded size memoised), saturating far above
// maxAliasedNodes.
func aliasedNodes(n *yaml.Node) int64 {
	memo := map[*yaml.Node]int64{}
	expanded := expandedSize(n, memo)
	return expanded - int64(len(memo))
}

// saturated is where expandedSize stops counting: above any document's
// own nodes plus maxAliasedNodes, and far from overflowing.
const saturated = int64(1) << 40

func expandedSize(n *yaml.Node, memo map[*yaml.Node]int64) int64 {
	if n == nil {
		return 0
	}
	if v, ok := memo[n]; ok {
		return v
	}
	memo[n] = saturated // a cycle of aliases counts as too many
	size := int64(1)
	if n.Kind == yaml.AliasNode {
		size = expandedSize(n.Alias, memo)
	}
	for _, c := range n.Content {
		size = min(size+expandedSize(c, memo), saturated)
	}
	memo[n] = size
	return size
}
