package serve

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// tiers are a policy's limits by tier, and the descriptor entry whose
// value chooses among them (tier_from: descriptor:Key).
type tiers struct {
	entry   int                     // the index, in the policy's match, of the entry that chooses
	byValue map[string]string       // an entry value: the tier it chooses
	limits  map[string]sluice.Limit // by tier
	deflt   string                  // the tier of a value no tier's values hold
}

// target is what one descriptor is decided by under a rule: its store key
// and limit, and its tier ("" without tiers).
type target struct {
	key   string
	limit sluice.Limit
	tier  string
}

// buildTiers checks pc's tiers, and returns them with the spec of the
// policy's stack, which has the default tier's limit; a policy without
// tiers gets nil and its own spec. Every tier's limit is built into a
// stack of pc's spec, and closed, so that what stack.Build refuses of a
// limit and a cost (a burst on a window algorithm, a cost above a sharded
// key's share or a local fallback's) is refused of each tier, naming it.
func buildTiers(pc PolicyConfig, store sluice.Store) (*tiers, stack.Spec, error) {
	spec := pc.Spec
	if len(pc.Tiers) == 0 && pc.TierFrom == "" && pc.DefaultTier == "" {
		return nil, spec, nil
	}
	switch {
	case len(pc.Tiers) == 0:
		return nil, spec, errors.New("tiers: none given, but tier_from or default_tier is: they choose among tiers")
	case spec.Rate != 0 || spec.Period != 0 || spec.Burst != 0:
		return nil, spec, errors.New("rate, period, burst: a policy with tiers has the limits of its tiers: give them in each tier")
	case pc.DefaultTier == "":
		return nil, spec, errors.New("default_tier: none given: name the tier of descriptors whose value no tier's values hold")
	}
	names := make([]string, 0, len(pc.Tiers))
	for name := range pc.Tiers {
		names = append(names, name)
	}
	slices.Sort(names)
	if _, ok := pc.Tiers[pc.DefaultTier]; !ok {
		return nil, spec, fmt.Errorf("default_tier: %q is not one of the tiers (%s)", pc.DefaultTier, strings.Join(names, ", "))
	}
	t := &tiers{byValue: map[string]string{}, limits: map[string]sluice.Limit{}, deflt: pc.DefaultTier}
	var err error
	if t.entry, err = tierEntry(pc); err != nil {
		return nil, spec, err
	}
	for _, name := range names {
		ft := pc.Tiers[name]
		s := spec
		s.Rate, s.Period, s.Burst, s.Tracing = ft.Rate, ft.Period, ft.Burst, false
		built, err := stack.Build(s, store)
		if err != nil {
			return nil, spec, fmt.Errorf("tier %q: %w", name, err)
		}
		t.limits[name] = built.Limit()
		_ = built.Close()
		values := ft.Values
		if len(values) == 0 {
			values = []string{name}
		}
		for _, v := range values {
			if v == "" {
				return nil, spec, fmt.Errorf("tiers: %q: values: an empty value chooses nothing", name)
			}
			if other, dup := t.byValue[v]; dup {
				return nil, spec, fmt.Errorf("tiers: %q and %q overlap: descriptor value %q would choose both", other, name, v)
			}
			t.byValue[v] = name
		}
	}
	def := pc.Tiers[pc.DefaultTier]
	spec.Rate, spec.Period, spec.Burst = def.Rate, def.Period, def.Burst
	return t, spec, nil
}

// tierEntry finds the match entry of tier_from: descriptor:Key: one, of
// any value.
func tierEntry(pc PolicyConfig) (int, error) {
	key, ok := strings.CutPrefix(pc.TierFrom, "descriptor:")
	switch {
	case pc.TierFrom == "":
		return 0, errors.New("tier_from: none given: descriptor:Key chooses the tier by the value of the descriptor's entry Key")
	case !ok || key == "":
		return 0, fmt.Errorf("tier_from: unknown %q (descriptor:Key, Key one of match's entries)", pc.TierFrom)
	}
	found := -1
	for i, m := range pc.Match {
		if m.Key != key {
			continue
		}
		if found >= 0 {
			return 0, fmt.Errorf("tier_from: match has two entries %q: say which chooses the tier", key)
		}
		if m.Value != "" {
			return 0, fmt.Errorf("tier_from: match's entry %q has the value %q, so it would always choose one tier: give it none", key, m.Value)
		}
		found = i
	}
	if found < 0 {
		return 0, fmt.Errorf("tier_from: match has no entry %q (%s)", key, describeMatch(pc.Match))
	}
	return found, nil
}

// target is the store key and limit of a descriptor of entries under r.
// A tiered rule's key leaves the choosing entry's value out and names the
// tier instead, so that every value that chooses a tier counts in that
// tier's one state, and each tier counts apart.
func (rs *rules) target(r *rule, entries []entry) target {
	if r.tiers == nil {
		return target{key: rs.keyOf(r, entries), limit: r.limit}
	}
	tier := r.tiers.byValue[entries[r.tiers.entry].value]
	if tier == "" {
		tier = r.tiers.deflt
	}
	values := make([]string, 0, len(entries)-1)
	for i, e := range entries {
		if i != r.tiers.entry {
			values = append(values, boundValue(e.value))
		}
	}
	return target{key: sluice.Key(strings.Join(values, "\x1f"), "serve", rs.domain, r.name, tier), limit: r.tiers.limits[tier], tier: tier}
}
