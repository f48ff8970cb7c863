package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
)

// Config is a policy file of sluice serve (YAML; JSON is YAML too). A
// policy is its name, the descriptor it matches and a stack.Spec inline
// (every field of package stack):
//
//	domain: edge          # the Envoy rate-limit domain the policies serve
//	unknown: allow        # descriptors no policy matches: allow (default) or deny
//	policies:
//	  - name: per-user
//	    match:            # the descriptor's entries, in order: a key, with a value if only that one matches
//	      - key: user_id
//	    algorithm: tokenbucket   # or gcra, fixedwindow, slidingcounter, slidinglog
//	    rate: 100
//	    period: 1m
//	    burst: 20         # buckets only; default: rate
//	    cost: 1           # per hit (hits_addend multiplies it)
//	    coalesce: true    # concurrent calls share script calls
//	    lease: 10         # take tokens in leases of 10 (token bucket, GCRA)
//	    shards: 4         # split the key over 4 sub-keys (hot tenants)
//	    hot_keys: [acme]  # lease and shard only these descriptor values
//	    deny_cache: true  # answer repeated denials in process
//	    fallback: open    # open, closed or local: decide so while the store is unavailable
//	    fallback_timeout: 50ms
//	    replicas: 3       # for fallback: local, the servers sharing the limit
//	    shadow: true      # dry run: decide and count, never deny (below)
//
// Every policy records metrics and spans (tracing is always on).
//
// A policy whose limit depends on the client's plan gives tiers instead
// of rate, period and burst, and the descriptor entry whose value chooses
// among them (one of match's keys, with no value):
//
//	policies:
//	  - name: plan
//	    match: [{key: api_key}, {key: plan}]
//	    tier_from: descriptor:plan
//	    default_tier: free       # the tier of a value no tier's values hold
//	    tiers:
//	      free: {rate: 60, period: 1m, burst: 10}
//	      pro:  {rate: 6000, period: 1m, burst: 500, values: [pro, pro-annual]} # default: [pro]
//
// Each tier counts apart: the key leaves the choosing value out and names
// the tier, so every value of a tier shares the tier's state. The status's
// current_limit and the RateLimit fields state the tier's limit. Every
// decorator serves every tier, and what stack.Build refuses of a limit
// and a cost is refused of each tier, as are an unknown default tier and
// one value for two tiers.
//
// A policy with shadow: true is a dry run: every hit is decided and
// counted in the store as it would be enforced, but a would-be denial is
// answered OK (gRPC) or allowed with "shadow_denied": true (POST
// /v1/allow), logged ("serve: shadow denial", Info, with the policy and
// the descriptor) and recorded with sluice.shadow=true on the decision
// metric and span. A shadow policy's descriptor status carries no limit,
// remaining or reset, and no RateLimit, RateLimit-Policy or Retry-After
// field is added for it, allowed or not, so that neither Envoy's headers
// nor the client can tell that a limit exists; a store error under it is
// logged and the descriptor answered OK over gRPC (POST /v1/allow still
// answers 503: its caller chooses what to do without a decision).
type Config struct {
	Domain   string         `yaml:"domain"`
	Unknown  string         `yaml:"unknown"`
	Policies []PolicyConfig `yaml:"policies"`
}

// PolicyConfig is one policy of a [Config].
type PolicyConfig struct {
	Name   string       `yaml:"name"`
	Match  []MatchEntry `yaml:"match"`
	Shadow bool         `yaml:"shadow"` // a dry run: see Config
	// TierFrom ("descriptor:Key"), DefaultTier and Tiers make the limit
	// depend on the value of one of the descriptor's entries: see Config.
	TierFrom    string              `yaml:"tier_from"`
	DefaultTier string              `yaml:"default_tier"`
	Tiers       httplimit.FileTiers `yaml:"tiers"`
	stack.Spec  `yaml:",inline"`
}

// MatchEntry is one descriptor entry a policy matches: Key, and Value when
// only that value matches (empty: any value).
type MatchEntry struct {
	Key   string `yaml:"key"`
	Value string `yaml:"value"`
}

// ParseConfig parses a policy file strictly: unknown fields, numbers that
// are not whole and a second document are errors.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := stack.CheckFile(data); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("serve: the policy file is empty")
		}
		return nil, fmt.Errorf("serve: parse policies: %w", err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return nil, errors.New("serve: parse policies: the file holds more than one document")
	}
	switch c.Unknown {
	case "", "allow", "deny":
	default:
		return nil, fmt.Errorf("serve: unknown: %q (allow or deny)", c.Unknown)
	}
	if len(c.Policies) == 0 {
		return nil, errors.New("serve: the file defines no policy")
	}
	return &c, nil
}
