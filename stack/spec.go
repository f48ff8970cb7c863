// Package stack builds a limiter from a declaration: the algorithm, the
// limit and cost, and which decorators wrap it (coalesce, lease, shard,
// denycache, fallback, sluiceotel). It is the one builder behind
// httplimit.Load, sluice serve's policy files and the bench, so that every
// feature is available in every policy file and is validated once, when
// the stack is built: a cost that no share or tier can ever allow is
// refused then, never on a request.
//
// A [Spec] is written in a policy file (YAML or JSON; its fields inline in
// a policy) or in Go:
//
//	algorithm: tokenbucket   # or gcra, fixedwindow, slidingcounter, slidinglog
//	rate: 100                # a whole number, per period
//	period: 1m
//	burst: 20                # buckets only; default: rate
//	cost: 1                  # per request; default 1
//	coalesce: true           # concurrent requests share script calls
//	lease: 50                # take tokens in leases of 50 (token bucket, GCRA)
//	shards: 4                # split each key over 4 sub-keys
//	hot_keys: [tenant-42]    # lease and shard only these keys (default: every key)
//	deny_cache: true         # answer repeated denials locally
//	fallback: local          # open, closed or local while the store fails
//	fallback_timeout: 50ms   # the store's budget per call
//	replicas: 3              # fallback local: the processes sharing the limit
//	tracing: true            # OpenTelemetry spans and metrics (sluiceotel)
//
// [Build] wraps the layers in one order, outermost first: sluiceotel,
// fallback, denycache, shard, lease, coalesce, the algorithm. A shard
// wraps the lease (each process leases from every share it uses, so one
// process can reach the whole limit), never the reverse (see
// docs/composition.md).
package stack

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Spec declares a limiter stack. The zero value of every field but Rate
// and Period is its default: the token bucket, Burst = Rate, cost 1, and
// no decorator.
type Spec struct {
	Algorithm string   `yaml:"algorithm" json:"algorithm"`
	Rate      Int      `yaml:"rate" json:"rate"`
	Period    Duration `yaml:"period" json:"period"`
	Burst     Int      `yaml:"burst" json:"burst"`
	Cost      Int      `yaml:"cost" json:"cost"`

	// Coalesce wraps the algorithm in coalesce.New: decisions stay exact,
	// and concurrent requests share script calls.
	Coalesce bool `yaml:"coalesce" json:"coalesce"`
	// Lease, when positive, is the size of a lease (lease.WithSize): each
	// process takes tokens in leases and decides most requests locally.
	// The token bucket and GCRA only.
	Lease Int `yaml:"lease" json:"lease"`
	// Shards, when 2 or more, splits each key over that many sub-keys
	// (shard.WithShards), for tenants too hot for one Redis node.
	Shards Int `yaml:"shards" json:"shards"`
	// HotKeys limits Lease and Shards to these keys (as shard.WithHotKeys
	// and lease.WithHotKeys choose them); empty: every key.
	HotKeys []string `yaml:"hot_keys" json:"hot_keys"`
	// DenyCache answers a key's repeated denials in process
	// (denycache.New) until its RetryAfter.
	DenyCache bool `yaml:"deny_cache" json:"deny_cache"`
	// Fallback decides while the store fails: "open", "closed" or "local"
	// (each process enforces its share of the limit; give Replicas).
	Fallback string `yaml:"fallback" json:"fallback"`
	// FallbackTimeout is the store's budget per call under Fallback
	// (default fallback.DefaultTimeout).
	FallbackTimeout Duration `yaml:"fallback_timeout" json:"fallback_timeout"`
	// Replicas is, for Fallback "local", how many processes share the
	// limit.
	Replicas Int `yaml:"replicas" json:"replicas"`
	// Tracing wraps the stack in sluiceotel.New: a span and metrics per
	// decision, on the providers given to Build (the global ones by
	// default).
	Tracing bool `yaml:"tracing" json:"tracing"`
}

// Int is a whole number of a Spec. A policy file that gives a fraction
// (2.9), an exponent (1e3) or anything but decimal digits is refused
// rather than truncated.
type Int int64

// UnmarshalYAML accepts a decimal integer scalar.
func (n *Int) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a whole number (line %d)", node.Line)
	}
	v, err := strconv.ParseInt(node.Value, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number (line %d)", node.Value, node.Line)
	}
	*n = Int(v)
	return nil
}

// UnmarshalJSON accepts a decimal integer.
func (n *Int) UnmarshalJSON(data []byte) error {
	v, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not a whole number", data)
	}
	*n = Int(v)
	return nil
}

// Duration is a time.Duration written as time.ParseDuration reads it
// ("1m", "250ms") in a policy file.
type Duration time.Duration

// UnmarshalYAML accepts a duration string.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration such as 1m (line %d)", node.Line)
	}
	v, err := time.ParseDuration(node.Value)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 1m or 250ms (line %d)", node.Value, node.Line)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON accepts a duration string.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%s is not a duration string such as \"1m\"", data)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 1m or 250ms", s)
	}
	*d = Duration(v)
	return nil
}

// String formats d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// CheckYAML reports the first field of a Spec written inline in node (a
// YAML mapping, such as one policy of a file; JSON is YAML too) whose
// value cannot be read, naming the field: a number that is not whole, or
// a duration that is not one. Decoding node into a Spec refuses the same
// without naming the field; a loader calls CheckYAML first to say which.
func CheckYAML(node *yaml.Node) error {
	if node == nil || node.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i].Value, node.Content[i+1]
		var err error
		switch k {
		case "rate", "burst", "cost", "lease", "shards", "replicas":
			var n Int
			err = n.UnmarshalYAML(v)
		case "period", "fallback_timeout":
			var d Duration
			err = d.UnmarshalYAML(v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// CheckFile is [CheckYAML] for each policy of a policy file (a document
// whose "policies" is a list of mappings with a Spec inline, YAML or
// JSON): the first field that cannot be read, naming the policy by its
// number and name, and the field. A document that does not parse is left
// to the file's decoder to report.
func CheckFile(data []byte) error {
	var root struct {
		Policies []yaml.Node `yaml:"policies"`
	}
	if yaml.Unmarshal(data, &root) != nil {
		return nil
	}
	for i, node := range root.Policies {
		if err := CheckYAML(&node); err != nil {
			var named struct {
				Name string `yaml:"name"`
			}
			_ = node.Decode(&named)
			return fmt.Errorf("policy %d (%q): %w", i+1, named.Name, err)
		}
	}
	return nil
}
