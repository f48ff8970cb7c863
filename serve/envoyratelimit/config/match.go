package config

import (
	"strconv"
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// Limit is what one request descriptor is limited by.
type Limit struct {
	// FullKey is envoyproxy/ratelimit's stat key for this descriptor: the
	// rule's configured key, or the request's values where
	// detailed_metric, value_to_metric or share_threshold say so, or, for
	// a per-request override, the domain and every entry.
	FullKey string
	// Unit and RequestsPerUnit are the limit in force (the override's,
	// when the descriptor carries one).
	Unit            rlsv3.RateLimitResponse_RateLimit_Unit
	RequestsPerUnit uint32
	// Period is Unit's length; 0 for an override with an unknown unit.
	Period time.Duration
	// Unlimited: the descriptor is always OK and never counted.
	Unlimited bool
	// ShadowMode: the rule counts and reports but never denies.
	ShadowMode bool
	// QuotaMode (quota_mode): over the limit, the descriptor still
	// answers OK, without its reset; the overall code is not changed.
	QuotaMode bool
	// Name is the rule's name ("" when unnamed or overridden).
	Name string
	// Replaces names the rules this one replaces within a request.
	Replaces []string
	// DetailedMetric is the rule's detailed_metric.
	DetailedMetric bool
	// Current is the response's current_limit: the limit as configured
	// (or overridden), with the rule's name.
	Current *rlsv3.RateLimitResponse_RateLimit
	// Rule is the matched rule's configured stat key (see [Rule]); "" for
	// an override.
	Rule string
	// RuleIndex is the matched rule's [Rule.Index]; -1 for an override.
	RuleIndex int
	// Override: the limit is the descriptor's own (descriptor.limit).
	Override bool
	// Tag and ID identify the counter, as envoyproxy/ratelimit's cache key
	// does without its time: Tag is the descriptor's values, ID its keys
	// and values (a share_threshold entry contributes its wildcard, so
	// that every value it matches shares one counter). Neither depends on
	// the limit, so a changed override keeps the counter.
	Tag, ID string
}

// Limit returns the limit of descriptor d in domain, or nil when nothing
// limits it: an unknown domain, no rule at the descriptor's full depth, or
// a matched level without rate_limit. It follows envoyproxy/ratelimit's
// GetLimit: a descriptor's own limit (descriptor.limit) applies to any
// descriptor of a known domain; otherwise each entry is looked up as
// "key_value", then among the level's wildcards in file order, then as the
// bare "key", greedily, without backtracking.
func (c *Config) Limit(domain string, d *ratelimitv3.RateLimitDescriptor) *Limit {
	dom := c.domains[domain]
	if dom == nil || d == nil {
		return nil
	}
	entries := d.GetEntries()
	if o := d.GetLimit(); o != nil {
		unit := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())
		l := &Limit{
			FullKey: overrideKey(domain, entries), Unit: unit, RequestsPerUnit: o.GetRequestsPerUnit(),
			Period:   Period(unit),
			Current:  &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: o.GetRequestsPerUnit(), Unit: unit},
			Override: true, RuleIndex: -1,
		}
		l.Tag, l.ID = identity(entries, nil)
		return l
	}

	level := dom
	var found *rule
	var shared map[int]string // entry index: the share_threshold wildcard's value
	detailed := []string{domain}
	toMetric := []string{domain}
	for i, e := range entries {
		exact := e.GetKey() + "_" + e.GetValue()
		detailed = append(detailed, exact)
		next := level.children[exact]
		wildcard := ""
		if next == nil {
			for _, w := range level.wildcards {
				if strings.HasPrefix(exact, strings.TrimSuffix(w, "*")) {
					next, wildcard = level.children[w], w
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = level.children[e.GetKey()]
		}
		if wildcard != "" && next.shareThreshold {
			if shared == nil {
				shared = map[int]string{}
			}
			shared[i] = strings.TrimPrefix(next.wildcardPattern, e.GetKey()+"_")
		}

		part := e.GetKey()
		if next != nil {
			var v string
			switch {
			case wildcard != "" && shared[i] != "":
				v = shared[i]
			case wildcard != "" && next.valueToMetric:
				v = e.GetValue()
			case wildcard != "":
				v = strings.TrimPrefix(wildcard, e.GetKey()+"_")
			case byValue || next.valueToMetric:
				v = e.GetValue()
			}
			if v != "" {
				part += "_" + v
			}
		}
		toMetric = append(toMetric, part)

		if next != nil && next.rule != nil && i == len(entries)-1 {
			found = next.rule
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		level = next
	}
	if found == nil {
		return nil
	}

	r := found
	l := &Limit{
		FullKey: r.fullKey, Unit: r.unit, RequestsPerUnit: r.perUnit, Period: Period(r.unit),
		Unlimited: r.unlimited, ShadowMode: r.shadow, QuotaMode: r.quota, Name: r.name,
		Replaces: append([]string(nil), r.replaces...), DetailedMetric: r.detailedMetric,
		Current: &rlsv3.RateLimitResponse_RateLimit{Name: r.name, RequestsPerUnit: r.perUnit, Unit: r.unit},
		Rule:    r.fullKey, RuleIndex: r.index,
	}
	var patterns []string
	if len(shared) > 0 {
		patterns = make([]string, len(entries))
		for i, p := range shared {
			patterns[i] = p
		}
	}
	switch {
	case r.detailedMetric && patterns != nil:
		parts := []string{domain}
		for i, e := range entries {
			part := e.GetKey()
			if patterns[i] != "" {
				part += "_" + patterns[i]
			} else if e.GetValue() != "" {
				part += "_" + e.GetValue()
			}
			parts = append(parts, part)
		}
		l.FullKey = strings.Join(parts, ".")
	case r.detailedMetric:
		l.FullKey = strings.Join(detailed, ".")
	default:
		l.FullKey = strings.Join(toMetric, ".")
	}
	l.Tag, l.ID = identity(entries, patterns)
	return l
}

// overrideKey is envoyproxy/ratelimit's stat key of an overridden
// descriptor: the domain, then each entry as "key" or "key_value".
func overrideKey(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = e.GetKey()
		if e.GetValue() != "" {
			parts[i] += "_" + e.GetValue()
		}
	}
	return domain + "." + strings.Join(parts, ".")
}

// Tag is the [Limit.Tag] of a descriptor whose entries have values, for a
// caller that names counters by their values (an overlay's hot keys).
func Tag(values []string) string {
	entries := make([]*ratelimitv3.RateLimitDescriptor_Entry, len(values))
	for i, v := range values {
		entries[i] = &ratelimitv3.RateLimitDescriptor_Entry{Value: v}
	}
	tag, _ := identity(entries, nil)
	return tag
}

// identity encodes the entries' values (Tag) and keys and values (ID),
// each quoted so that no two descriptors share an encoding; patterns, when
// given, replace the values of the entries they name.
func identity(entries []*ratelimitv3.RateLimitDescriptor_Entry, patterns []string) (string, string) {
	var tag, id strings.Builder
	for i, e := range entries {
		v := e.GetValue()
		if i < len(patterns) && patterns[i] != "" {
			v = patterns[i]
		}
		if i > 0 {
			tag.WriteByte(',')
			id.WriteByte(',')
		}
		tag.WriteString(strconv.Quote(v))
		id.WriteString(strconv.Quote(e.GetKey()))
		id.WriteByte('=')
		id.WriteString(strconv.Quote(v))
	}
	return tag.String(), id.String()
}
