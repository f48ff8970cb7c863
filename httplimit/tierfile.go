package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// FileTier is one tier of a [FilePolicy]: its limit, as a policy's rate,
// period and burst are written, and the values that choose it.
type FileTier struct {
	Rate   stack.Int      `yaml:"rate" json:"rate"`
	Period stack.Duration `yaml:"period" json:"period"`
	Burst  stack.Int      `yaml:"burst" json:"burst"` // buckets only; default: rate
	// Values choose the tier: under tier_from: header:Name, values of
	// the header (default: the tier's name); under tier_from: key-prefix,
	// prefixes of the key (none: the tier is only the default). No value
	// may choose two tiers: equal values, or a prefix of another prefix,
	// are refused.
	Values []string `yaml:"values" json:"values"`
}

// FileTiers are a policy's tiers by name. In JSON, a name given twice is
// refused, as YAML refuses it.
type FileTiers map[string]FileTier

// UnmarshalJSON reads an object of tiers by name strictly: unknown
// fields and a name given twice are errors.
func (ts *FileTiers) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("tiers: want an object of tiers by name")
	}
	m := FileTiers{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("tiers: %w", err)
		}
		name, _ := tok.(string)
		if _, dup := m[name]; dup {
			return fmt.Errorf("tiers: %q is given twice", name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("tiers: %q: %w", name, err)
		}
		strict := json.NewDecoder(bytes.NewReader(raw))
		strict.DisallowUnknownFields()
		var t FileTier
		if err := strict.Decode(&t); err != nil {
			return fmt.Errorf("tiers: %q: %w", name, err)
		}
		m[name] = t
	}
	*ts = m
	return nil
}

// names are the tiers' names, sorted, so that errors and checks come in
// one order.
func (ts FileTiers) names() []string {
	names := make([]string, 0, len(ts))
	for name := range ts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (ts FileTiers) tiers() []Tier {
	out := make([]Tier, 0, len(ts))
	for _, name := range ts.names() {
		out = append(out, Tier{Name: name, Limit: ts[name].limit()})
	}
	return out
}

// limit is the tier's limit, its burst defaulting to its rate as a
// policy's does.
func (t FileTier) limit() sluice.Limit {
	l := sluice.Limit{Rate: int64(t.Rate), Period: time.Duration(t.Period), Burst: int64(t.Burst)}
	if l.Burst == 0 {
		l.Burst = l.Rate
	}
	return l
}

// tieredSpec returns the spec of the policy's stack, the default tier's
// limit in it when the policy has tiers, and the tier function (nil
// without tiers).
func (fp FilePolicy) tieredSpec() (stack.Spec, TierFunc, error) {
	spec := fp.Spec
	if len(fp.Tiers) == 0 && fp.TierFrom == "" && fp.DefaultTier == "" {
		return spec, nil, nil
	}
	switch {
	case len(fp.Tiers) == 0:
		return spec, nil, errors.New("tiers: none given, but tier_from or default_tier is: they choose among tiers")
	case fp.Rate != 0 || fp.Period != 0 || fp.Burst != 0:
		return spec, nil, errors.New("rate, period, burst: a policy with tiers has the limits of its tiers: give them in each tier")
	case fp.DefaultTier == "":
		return spec, nil, errors.New("default_tier: none given: name the tier of requests that no tier's value chooses")
	}
	def, ok := fp.Tiers[fp.DefaultTier]
	if !ok {
		return spec, nil, fmt.Errorf("default_tier: %q is not one of the tiers (%s)", fp.DefaultTier, strings.Join(fp.Tiers.names(), ", "))
	}
	tierOf, err := fp.tierFunc()
	if err != nil {
		return spec, nil, err
	}
	spec.Rate, spec.Period, spec.Burst = def.Rate, def.Period, def.Burst
	return spec, tierOf, nil
}

// tierFunc builds the tier function of TierFrom, refusing values that
// would choose two tiers.
func (fp FilePolicy) tierFunc() (TierFunc, error) {
	switch {
	case strings.HasPrefix(fp.TierFrom, "header:"):
		name := strings.TrimPrefix(fp.TierFrom, "header:")
		if err := ValidHeaderName(name); err != nil {
			return nil, fmt.Errorf("tier_from: %w", err)
		}
		byValue := map[string]string{}
		for _, tier := range fp.Tiers.names() {
			values := fp.Tiers[tier].Values
			if len(values) == 0 {
				values = []string{tier}
			}
			for _, v := range values {
				if v == "" {
					return nil, fmt.Errorf("tiers: %q: values: an empty value chooses nothing", tier)
				}
				if other, dup := byValue[v]; dup {
					return nil, fmt.Errorf("tiers: %q and %q overlap: header value %q would choose both", other, tier, v)
				}
				byValue[v] = tier
			}
		}
		canonical := http.CanonicalHeaderKey(name)
		return func(r *http.Request, _ string) (string, error) {
			return byValue[r.Header.Get(canonical)], nil
		}, nil
	case fp.TierFrom == "key-prefix":
		type prefix struct{ prefix, tier string }
		var prefixes []prefix
		for _, tier := range fp.Tiers.names() {
			values := fp.Tiers[tier].Values
			if len(values) == 0 && tier != fp.DefaultTier {
				return nil, fmt.Errorf("tiers: %q: values: none, so no key chooses it: give the key prefixes of its clients", tier)
			}
			for _, v := range values {
				if v == "" {
					return nil, fmt.Errorf("tiers: %q: values: an empty prefix would choose every key", tier)
				}
				for _, other := range prefixes {
					if strings.HasPrefix(v, other.prefix) || strings.HasPrefix(other.prefix, v) {
						return nil, fmt.Errorf("tiers: %q and %q overlap: key prefixes %q and %q would both choose a key starting with the longer",
							other.tier, tier, other.prefix, v)
					}
				}
				prefixes = append(prefixes, prefix{v, tier})
			}
		}
		return func(_ *http.Request, key string) (string, error) {
			for _, p := range prefixes {
				if strings.HasPrefix(key, p.prefix) {
					return p.tier, nil
				}
			}
			return "", nil
		}, nil
	case fp.TierFrom == "":
		return nil, errors.New("tier_from: none given: header:Name or key-prefix chooses the tier of a request")
	default:
		return nil, fmt.Errorf("tier_from: unknown %q (header:Name or key-prefix)", fp.TierFrom)
	}
}

// checkLimits builds, and closes, the stack of spec under every tier's
// limit (or the policy's own) with every cost of the policy, so that what
// stack.Build refuses of a limit and a cost (a burst on a window
// algorithm, a cost above a sharded key's share or a local fallback's) is
// refused of each, naming the tier and the route.
func (fp FilePolicy) checkLimits(spec stack.Spec, store sluice.Store) error {
	type limit struct {
		where       string
		rate, burst stack.Int
		period      stack.Duration
	}
	limits := []limit{{"", spec.Rate, spec.Burst, spec.Period}}
	if len(fp.Tiers) > 0 {
		limits = limits[:0]
		for _, name := range fp.Tiers.names() {
			t := fp.Tiers[name]
			limits = append(limits, limit{fmt.Sprintf("tier %q: ", name), t.Rate, t.Burst, t.Period})
		}
	}
	for _, l := range limits {
		costs := append([]RouteCost{{Cost: int64(spec.Cost)}}, fp.Costs...)
		for i, c := range costs {
			if i > 0 && c.Cost < 1 {
				continue // refused by Middleware, naming the route
			}
			s := spec
			s.Rate, s.Burst, s.Period, s.Cost, s.Tracing = l.rate, l.burst, l.period, stack.Int(c.Cost), false
			built, err := stack.Build(s, store)
			if err != nil {
				if i > 0 {
					return fmt.Errorf("%sroute %q: %w", l.where, c.Route, err)
				}
				return fmt.Errorf("%s%w", l.where, err)
			}
			_ = built.Close()
		}
	}
	return nil
}
