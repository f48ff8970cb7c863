package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

// FileConfig is the shape of a policy file, YAML or JSON. A policy is its
// name, its key, its routes and a [stack.Spec] inline (every field of
// package stack: algorithm, limit, cost and decorators):
//
//	policies:
//	  - name: per-ip
//	    key: remote-addr         # or "header:X-API-Key"
//	    routes: ["POST /orders"] # net/http ServeMux patterns; none: every route
//	    algorithm: tokenbucket   # or gcra, fixedwindow, slidingcounter, slidinglog
//	    rate: 100                # a whole number
//	    period: 1m
//	    burst: 20                # buckets only; default: rate
//	    cost: 1                  # default: 1
//	    coalesce: true           # concurrent requests share script calls
//	    lease: 50                # tokens taken in leases of 50 (buckets only)
//	    shards: 4                # each key split over 4 sub-keys
//	    hot_keys: [tenant-42]    # lease and shard only these clients' keys
//	    deny_cache: true         # repeated denials answered in process
//	    fallback: open           # open, closed or local while Redis fails
//	    fallback_timeout: 50ms
//	    replicas: 3              # fallback: local, the processes sharing the limit
//	    tracing: true            # OpenTelemetry spans and metrics
//	    shadow: true             # dry run: decide and count, never deny (Policy.Shadow)
//
// A policy whose limit depends on the client gives tiers instead of rate,
// period and burst, and what chooses among them ([FilePolicy.TierFrom]);
// costs gives particular routes their cost, from the same budget:
//
//	policies:
//	  - name: plan
//	    key: header:X-API-Key
//	    tier_from: header:X-Plan # or key-prefix
//	    default_tier: free
//	    tiers:
//	      free: {rate: 60, period: 1m, burst: 10}
//	      pro:  {rate: 6000, period: 1m, burst: 500, values: [pro, pro-annual]}
//	    costs:
//	      - {route: "POST /reports", cost: 10}
type FileConfig struct {
	Policies []FilePolicy `yaml:"policies" json:"policies"`
}

// FilePolicy is one policy of a [FileConfig].
type FilePolicy struct {
	Name   string   `yaml:"name" json:"name"`
	Key    string   `yaml:"key" json:"key"`
	Routes []string `yaml:"routes" json:"routes"`
	// Shadow is [Policy.Shadow]: decided and counted, never denied.
	Shadow bool `yaml:"shadow" json:"shadow"`
	// TierFrom says what chooses the tier of a request: "header:Name",
	// the value of a header (a tier's values, by default its name), or
	// "key-prefix", the request's key as the key function derives it (a
	// tier's values are prefixes; a header key over 64 bytes is its
	// SHA-256, which no prefix chooses). A request that no tier's value
	// chooses is in DefaultTier. Both are what the client sends: use them
	// behind what authenticates it (a gateway that sets the header, API
	// keys that are checked), or a client names its own plan.
	TierFrom string `yaml:"tier_from" json:"tier_from"`
	// DefaultTier names the tier of requests no tier's value chooses.
	DefaultTier string `yaml:"default_tier" json:"default_tier"`
	// Tiers are the policy's limits by tier name ([Policy.Tiers]); the
	// policy then gives no rate, period or burst of its own. Its
	// decorators (coalesce, lease, shards, fallback, tracing...) apply to
	// every tier, and what stack.Build refuses of a limit and a cost is
	// refused of every tier and every cost.
	Tiers FileTiers `yaml:"tiers" json:"tiers"`
	// Costs are [Policy.Costs]: particular routes' costs, from the same
	// budget; cost is every other request's.
	Costs      []RouteCost `yaml:"costs" json:"costs"`
	stack.Spec `yaml:",inline"`
}

// Policies are the policies of a loaded file. Close them when done: a
// policy with a lease gives its unspent tokens back.
type Policies []Policy

// Close closes every policy's limiter that holds anything (an io.Closer).
func (ps Policies) Close() error {
	var errs []error
	for _, p := range ps {
		if c, ok := p.Limiter.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Load parses a policy file, YAML or JSON, and builds each policy's
// limiter on store with [stack.Build] (opts go to it); pass the policies
// to [Middleware], and Close them when done. Unknown fields, algorithms
// and keys are errors, as are numbers that are not whole, a JSON document
// with anything after it (trailing commas included), a second YAML
// document, everything stack.Build refuses (a cost that a share or a
// fallback can never allow among it) and everything Middleware refuses.
// Each error names the policy and the field; after one, nothing is left
// open.
func Load(data []byte, store sluice.Store, opts ...stack.Option) (Policies, error) {
	fc, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("httplimit: parse policies: %w", err)
	}
	if len(fc.Policies) == 0 {
		return nil, errors.New("httplimit: the file defines no policy")
	}
	policies := make(Policies, 0, len(fc.Policies))
	for i, fp := range fc.Policies {
		p, err := fp.build(store, opts)
		if err != nil {
			_ = policies.Close()
			return nil, fmt.Errorf("httplimit: policy %d (%q): %w", i+1, fp.Name, err)
		}
		policies = append(policies, p)
	}
	// What Middleware would refuse, refused now.
	if _, err := preparePolicies(policies); err != nil {
		_ = policies.Close()
		return nil, err
	}
	return policies, nil
}

// parse decodes JSON strictly when data is a JSON object, and YAML
// otherwise (one document).
func parse(data []byte) (FileConfig, error) {
	var fc FileConfig
	if err := stack.CheckFile(data); err != nil {
		return fc, err
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			return fc, fmt.Errorf("JSON: %w", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return fc, errors.New("JSON: something follows the document")
		}
		return fc, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		return fc, err
	}
	var second yaml.Node
	if err := dec.Decode(&second); err != io.EOF {
		return fc, errors.New("YAML: the file holds more than one document")
	}
	return fc, nil
}

func (fp FilePolicy) build(store sluice.Store, opts []stack.Option) (Policy, error) {
	var key KeyFunc
	switch {
	case fp.Key == "" || fp.Key == "remote-addr":
		key = RemoteAddr()
	case strings.HasPrefix(fp.Key, "header:"):
		name := strings.TrimPrefix(fp.Key, "header:")
		if err := ValidHeaderName(name); err != nil {
			return Policy{}, fmt.Errorf("key: %w", err)
		}
		key = Header(name)
	default:
		return Policy{}, fmt.Errorf("key: unknown %q (remote-addr or header:Name)", fp.Key)
	}
	if !ValidPolicyName(fp.Name) {
		return Policy{}, fmt.Errorf("name: %q: use 1 to 64 letters, digits, '-', '_' or '.'", fp.Name)
	}
	spec, tierOf, err := fp.tieredSpec()
	if err != nil {
		return Policy{}, err
	}
	if err := fp.checkLimits(spec, store); err != nil {
		return Policy{}, err
	}
	st, err := stack.Build(spec, store, append([]stack.Option{stack.WithName(fp.Name)}, opts...)...)
	if err != nil {
		return Policy{}, err
	}
	p := Policy{Name: fp.Name, Limiter: st, Limit: st.Limit(), Cost: st.Cost(), Key: key, Routes: fp.Routes,
		Shadow: fp.Shadow, Costs: fp.Costs}
	if tierOf != nil {
		p.Limit = sluice.Limit{}
		p.Tiers, p.TierOf, p.DefaultTier = fp.Tiers.tiers(), tierOf, fp.DefaultTier
	}
	return p, nil
}
