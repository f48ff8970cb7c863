// Package config reads envoyproxy/ratelimit's YAML configuration (one
// domain per file, nested descriptors) as that service reads and validates
// it, and matches request descriptors to their limits as its GetLimit does.
//
// The behaviour followed is envoyproxy/ratelimit's at commit 3fb702589d36
// (src/config/config_impl.go), with lyft/goruntime's directory walk for
// [ReadDir]; docs/serve.md lists where Sluice differs on purpose.
package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// File is one configuration file: its path (errors name it) and content.
type File struct {
	Path string
	Data []byte
}

// Config is a loaded set of domains. It is immutable and safe for
// concurrent use.
type Config struct {
	domains map[string]*node
	rules   []*rule
}

// node is one level of a domain's descriptor tree.
type node struct {
	children        map[string]*node // by "key" or "key_value"
	wildcards       []string         // children keys ending in '*', in file order
	rule            *rule            // nil: no rate_limit here
	valueToMetric   bool
	shareThreshold  bool
	wildcardPattern string // the child key, when shareThreshold
}

// rule is one rate_limit of a file.
type rule struct {
	fullKey        string
	unit           rlsv3.RateLimitResponse_RateLimit_Unit
	perUnit        uint32
	unlimited      bool
	shadow         bool
	quota          bool
	name           string
	replaces       []string
	detailedMetric bool
	index          int // in Config.rules
}

// Rule describes one configured rate_limit, for a caller that builds
// something per rule (a limiter, an overlay check).
type Rule struct {
	// Index is the rule's place in [Config.Rules], which identifies it:
	// two rules may have one stat key (a key "a.b" beside a key "a" with
	// a nested "b"), and each is a limit of its own.
	Index int
	// Key is the rule's stat key as configured: the domain, then each
	// level's "key" or "key_value", joined by '.'.
	Key             string
	Name            string
	Unit            rlsv3.RateLimitResponse_RateLimit_Unit
	RequestsPerUnit uint32
	Unlimited       bool
}

// Rules lists every configured rate_limit, in file order.
func (c *Config) Rules() []Rule {
	out := make([]Rule, len(c.rules))
	for i, r := range c.rules {
		out[i] = Rule{Index: i, Key: r.fullKey, Name: r.name, Unit: r.unit, RequestsPerUnit: r.perUnit, Unlimited: r.unlimited}
	}
	return out
}

// Dump writes every configured rate_limit, one a line, as
// envoyproxy/ratelimit's /rlconfig does: "<stat key>: unit=<UNIT>
// requests_per_unit=<n>, shadow_mode: <bool>, quota_mode: <bool>". Theirs
// walks maps, in no fixed order; these lines are in file order, a level's
// descendants before it.
func (c *Config) Dump() string {
	var b strings.Builder
	for _, r := range c.rules {
		fmt.Fprintf(&b, "%s: unit=%s requests_per_unit=%d, shadow_mode: %t, quota_mode: %t\n",
			r.fullKey, r.unit, r.perUnit, r.shadow, r.quota)
	}
	return b.String()
}

// Domains counts the loaded domains.
func (c *Config) Domains() int { return len(c.domains) }

// HasDomain reports whether domain is configured.
func (c *Config) HasDomain(domain string) bool { return c.domains[domain] != nil }

// Period is a unit's length as envoyproxy/ratelimit counts it (a MONTH is
// 30 days, a YEAR 365), or 0 for UNKNOWN and any other value.
func Period(u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	const day = 24 * time.Hour
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return time.Second
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return time.Minute
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return time.Hour
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return day
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * day
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * day
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * day
	}
	return 0
}

// Load reads files, one domain each, and validates them as
// envoyproxy/ratelimit does: unknown keys anywhere are refused, a domain
// given by two files is refused unless mergeDomains (MERGE_DOMAIN_CONFIG),
// when the second file's descriptors are added to the first's. Files are
// loaded in the order given. An error names the file (its Path) and, where
// it is about one, the descriptor.
func Load(files []File, mergeDomains bool) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	for _, f := range files {
		root, err := parse(f.Data)
		if err != nil {
			return nil, fileError(f.Path, err.Error())
		}
		if err := c.load(f.Path, root, mergeDomains); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func fileError(path, msg string) error { return errors.New(path + ": " + msg) }

func newNode() *node { return &node{children: map[string]*node{}} }

func (c *Config) load(path string, root yamlRoot, merge bool) error {
	if root.Domain == "" {
		return fileError(path, "config file cannot have empty domain")
	}
	dom := c.domains[root.Domain]
	if dom != nil && !merge {
		return fileError(path, fmt.Sprintf("duplicate domain '%s' in config file", root.Domain))
	}
	if dom == nil {
		dom = newNode()
	}
	if err := c.loadLevel(path, dom, root.Domain+".", root.Descriptors); err != nil {
		return err
	}
	c.domains[root.Domain] = dom
	return nil
}

// loadLevel adds descriptors under n, whose stat key is parent (ending in
// '.'), checking each as envoyproxy/ratelimit does and in its order.
func (c *Config) loadLevel(path string, n *node, parent string, descriptors []yamlDescriptor) error {
	for _, d := range descriptors {
		if d.Key == "" {
			return fileError(path, "descriptor has empty key")
		}
		childKey := d.Key
		if d.Value != "" {
			childKey += "_" + d.Value
		}
		full := parent + childKey
		if n.children[childKey] != nil {
			return fileError(path, fmt.Sprintf("duplicate descriptor composite key '%s'", full))
		}
		child := newNode()
		child.valueToMetric = d.ValueToMetric
		if d.RateLimit != nil {
			r, err := newRule(d, full)
			if err != nil {
				return fileError(path, err.Error())
			}
			child.rule = r
		}
		wildcard := strings.HasSuffix(childKey, "*")
		if d.ShareThreshold {
			if !wildcard {
				return fileError(path, fmt.Sprintf("share_threshold can only be used with wildcard values (ending with '*'), but found key '%s'", childKey))
			}
			child.shareThreshold = true
			child.wildcardPattern = childKey
		}
		if wildcard {
			n.wildcards = append(n.wildcards, childKey)
		}
		if err := c.loadLevel(path, child, full+".", d.Descriptors); err != nil {
			return err
		}
		n.children[childKey] = child
		if child.rule != nil {
			child.rule.index = len(c.rules)
			c.rules = append(c.rules, child.rule)
		}
	}
	return nil
}

func newRule(d yamlDescriptor, fullKey string) (*rule, error) {
	y := d.RateLimit
	v, known := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(y.Unit)]
	valid := known && v != int32(rlsv3.RateLimitResponse_RateLimit_UNKNOWN)
	switch {
	case y.Unlimited && valid:
		return nil, errors.New("should not specify rate limit unit when unlimited")
	case !y.Unlimited && !valid:
		return nil, fmt.Errorf("invalid rate limit unit '%s'", y.Unit)
	}
	for _, r := range y.Replaces {
		if r == "" {
			return nil, errors.New("should not have an empty replaces entry")
		}
		if r == y.Name {
			return nil, errors.New("replaces should not contain name of same descriptor")
		}
	}
	return &rule{
		fullKey: fullKey, unit: rlsv3.RateLimitResponse_RateLimit_Unit(v), perUnit: y.RequestsPerUnit,
		unlimited: y.Unlimited, shadow: d.ShadowMode, quota: d.QuotaMode, name: y.Name,
		replaces: append([]string{}, y.Replaces...), detailedMetric: d.DetailedMetric,
	}, nil
}
