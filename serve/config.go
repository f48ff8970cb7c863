package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is a policy file of sluice serve (YAML; JSON is YAML too):
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
//	    lease: 10         # take tokens in batches of 10 (token bucket, GCRA)
//	    shards: 4         # split the key over 4 sub-keys (hot tenants)
//	    fallback: open    # open, closed or local: decide so while the store is unavailable
//	    fallback_timeout: 50ms
//	    replicas: 3       # for fallback: local, the servers sharing the limit
type Config struct {
	Domain   string         `yaml:"domain"`
	Unknown  string         `yaml:"unknown"`
	Policies []PolicyConfig `yaml:"policies"`
}

// PolicyConfig is one policy of a [Config].
type PolicyConfig struct {
	Name            string       `yaml:"name"`
	Match           []MatchEntry `yaml:"match"`
	Algorithm       string       `yaml:"algorithm"`
	Rate            int64        `yaml:"rate"`
	Period          string       `yaml:"period"`
	Burst           int64        `yaml:"burst"`
	Cost            int64        `yaml:"cost"`
	Coalesce        bool         `yaml:"coalesce"`
	Lease           int64        `yaml:"lease"`
	Shards          int          `yaml:"shards"`
	Fallback        string       `yaml:"fallback"`
	FallbackTimeout string       `yaml:"fallback_timeout"`
	Replicas        int          `yaml:"replicas"`
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
	if err := wholeNumbers(data); err != nil {
		return nil, err
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

// wholeNumbers refuses a fraction or an exponent where the file gives
// rate, burst, cost, lease, shards or replicas (yaml truncates them into
// integers otherwise).
func wholeNumbers(data []byte) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("serve: parse policies: %w", err)
	}
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				switch k.Value {
				case "rate", "burst", "cost", "lease", "shards", "replicas":
					if v.Kind == yaml.ScalarNode {
						if _, err := strconv.ParseInt(v.Value, 10, 64); err != nil {
							return fmt.Errorf("serve: line %d: %s: %q is not a whole number", v.Line, k.Value, v.Value)
						}
					}
				}
			}
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(&root)
}

func parseDuration(field, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", field, s, err)
	}
	return d, nil
}
