package replay

import (
	"fmt"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

// LoadPolicies reads the policies of an httplimit policy file (YAML or
// JSON), checked exactly as httplimit.Load checks them: a file the
// middleware would refuse is refused with its error. Each policy is
// replayed with its routes, algorithm, limit, cost and route costs; a
// policy with tiers chosen by key prefix (tier_from: key-prefix) replays
// as one policy per tier, named policy/tier. A tier chosen by a header
// cannot be known from an access log, and is refused. Decorators do not
// change what a policy decides (coalesce is exact) or change it in ways
// only the running processes know (lease, shards, fallback), and are not
// replayed. Each policy says how the file keys it (Policy.KeyedBy); the
// caller reads the log's keys to match and sets Policy.KeyIndex.
func LoadPolicies(data []byte) ([]Policy, error) {
	store, err := memstore.New()
	if err != nil {
		return nil, err
	}
	loaded, err := httplimit.Load(data, store)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer loaded.Close()
	var file httplimit.FileConfig
	if err := yaml.Unmarshal(data, &file); err != nil || len(file.Policies) != len(loaded) {
		return nil, fmt.Errorf("replay: the policy file reads differently a second time: %v", err)
	}
	var out []Policy
	for i, p := range loaded {
		st, ok := p.Limiter.(*stack.Stack)
		if !ok {
			return nil, fmt.Errorf("replay: policy %q: not built from a stack", p.Name)
		}
		keyedBy := file.Policies[i].Key
		if keyedBy == "" {
			keyedBy = "remote-addr"
		}
		base := Policy{Name: p.Name, Routes: p.Routes, Algorithm: st.AlgorithmName(), Limit: p.Limit, Cost: p.Cost, Shadow: p.Shadow, KeyedBy: keyedBy}
		for _, c := range p.Costs {
			base.Costs = append(base.Costs, RouteCost{Route: c.Route, Cost: c.Cost})
		}
		if len(p.Tiers) == 0 {
			out = append(out, base)
			continue
		}
		if from := file.Policies[i].TierFrom; from != "key-prefix" {
			return nil, fmt.Errorf("replay: policy %q: tier_from %s: an access log does not say which tier a request was on; replay each tier with --limit, or choose tiers by key-prefix",
				p.Name, strings.TrimSpace(from))
		}
		tierOf, def := p.TierOf, p.DefaultTier
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		choose := func(key string) string {
			if t, err := tierOf(req, key); err == nil && t != "" {
				return t
			}
			return def
		}
		for _, t := range p.Tiers {
			tp := base
			tp.Name, tp.Limit, tp.Tier, tp.TierOf = p.Name+"/"+t.Name, t.Limit, t.Name, choose
			out = append(out, tp)
		}
	}
	return out, nil
}
