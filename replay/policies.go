package replay

import (
	"fmt"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

// LoadPolicies reads the policies of an httplimit policy file (YAML or
// JSON), checked exactly as httplimit.Load checks them: a file the
// middleware would refuse is refused with its error. Each policy is
// replayed with its routes, algorithm, limit and cost; its decorators do
// not change what it decides (coalesce is exact) or change it in ways only
// the running processes know (lease, shards, fallback), and are not
// replayed. Every policy is keyed as the replay keys records.
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
	out := make([]Policy, 0, len(loaded))
	for _, p := range loaded {
		st, ok := p.Limiter.(*stack.Stack)
		if !ok {
			return nil, fmt.Errorf("replay: policy %q: not built from a stack", p.Name)
		}
		out = append(out, Policy{Name: p.Name, Routes: p.Routes, Algorithm: st.AlgorithmName(), Limit: p.Limit, Cost: p.Cost})
	}
	return out, nil
}
