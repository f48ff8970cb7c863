package serve

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
)

// rule is one policy, built: its limiter with every decorator the file
// asked for.
type rule struct {
	name      string
	match     []MatchEntry
	limit     sluice.Limit
	cost      int64
	limiter   *stack.Stack   // the whole stack, sluiceotel outermost
	algorithm sluice.Limiter // the bare algorithm, for the RateLimit fields
	fallback  string         // "", "open", "closed", "local"
	shadow    bool           // decided and counted, never denied
	tiers     *tiers         // nil: limit, for every descriptor
}

// rules is one loaded policy file: what a request is decided by until a
// reload replaces it.
type rules struct {
	domain  string
	deny    bool // descriptors no policy matches are denied
	byName  map[string]*rule
	ordered []*rule

	// mu is held for reading by every call in flight, so that Close waits
	// for them before it closes the leases.
	mu     sync.RWMutex
	closed bool
}

// buildRules builds every policy of c on store, recording metrics on mp.
// On error nothing is left open.
func buildRules(c *Config, store sluice.Store, mp metric.MeterProvider) (*rules, error) {
	rs := &rules{domain: c.Domain, deny: c.Unknown == "deny", byName: map[string]*rule{}}
	for i, pc := range c.Policies {
		r, err := buildRule(pc, store, mp)
		if err != nil {
			rs.Close()
			return nil, fmt.Errorf("serve: policy %d (%q): %w", i+1, pc.Name, err)
		}
		if _, dup := rs.byName[pc.Name]; dup {
			rs.Close()
			return nil, fmt.Errorf("serve: policy %d: name %q is taken by an earlier policy", i+1, pc.Name)
		}
		for _, other := range rs.ordered {
			if sameMatch(other.match, r.match) {
				rs.Close()
				return nil, fmt.Errorf("serve: policy %q: match: the same descriptor as policy %q", pc.Name, other.name)
			}
		}
		rs.byName[pc.Name] = r
		rs.ordered = append(rs.ordered, r)
	}
	return rs, nil
}

func sameMatch(a, b []MatchEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func buildRule(pc PolicyConfig, store sluice.Store, mp metric.MeterProvider) (*rule, error) {
	if !httplimit.ValidPolicyName(pc.Name) {
		return nil, fmt.Errorf("name: %q: use 1 to 64 letters, digits, '-', '_' or '.'", pc.Name)
	}
	if len(pc.Match) == 0 || len(pc.Match) > maxEntries {
		return nil, fmt.Errorf("match: give 1 to %d descriptor entries", maxEntries)
	}
	for _, m := range pc.Match {
		if m.Key == "" {
			return nil, errors.New("match: an entry has no key")
		}
	}
	ts, spec, err := buildTiers(pc, store)
	if err != nil {
		return nil, err
	}
	spec.Tracing = true // the service's metrics
	st, err := stack.Build(spec, store, stack.WithName(pc.Name), stack.WithMeterProvider(mp))
	if err != nil {
		return nil, err
	}
	return &rule{name: pc.Name, match: pc.Match, limit: st.Limit(), cost: st.Cost(), limiter: st,
		algorithm: st.Algorithm(), fallback: pc.Fallback, shadow: pc.Shadow, tiers: ts}, nil
}

// Close waits for the calls in flight on rs and closes its leases, giving
// their unspent tokens back to the store. It is safe to call twice.
func (rs *rules) Close() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return nil
	}
	rs.closed = true
	var errs []error
	for _, r := range rs.ordered {
		errs = append(errs, r.limiter.Close())
	}
	return errors.Join(errs...)
}

// maxEntries bounds the entries of one descriptor, and maxDescriptors the
// descriptors of one request.
const (
	maxEntries     = 16
	maxDescriptors = 64
	maxValueBytes  = 64
)

// match returns the rule whose entries a descriptor's are, or nil.
func (rs *rules) match(entries []entry) *rule {
	for _, r := range rs.ordered {
		if r.matches(entries) {
			return r
		}
	}
	return nil
}

// matches reports whether r matches a descriptor of entries: as many, with
// the same keys in order and, where r gives a value, that value.
func (r *rule) matches(entries []entry) bool {
	if len(r.match) != len(entries) {
		return false
	}
	for i, m := range r.match {
		if m.Key != entries[i].key || m.Value != "" && m.Value != entries[i].value {
			return false
		}
	}
	return true
}

type entry struct{ key, value string }

// keyOf is the Redis key of a descriptor under rule r: the values, as the
// hash tag (so that a tenant's keys share a Cluster slot), then the
// domain and the policy. A value over 64 bytes is replaced by its SHA-256,
// so that callers cannot make keys of any size.
func (rs *rules) keyOf(r *rule, entries []entry) string {
	values := make([]string, len(entries))
	for i, e := range entries {
		values[i] = boundValue(e.value)
	}
	return sluice.Key(strings.Join(values, "\x1f"), "serve", rs.domain, r.name)
}

// targetOfRequest is the Redis key and limit of a /v1/allow request under
// rule r: those of the descriptor it names (Key, as a descriptor of r's
// one entry, or Descriptor), or an error when r does not match that
// descriptor or a policy listed before r matches it first (as a gRPC
// descriptor is matched), so that a request cannot be decided under a
// policy of another tenant, nor a looser one.
func (rs *rules) targetOfRequest(r *rule, req AllowRequest) (target, error) {
	var entries []entry
	switch {
	case req.Key != "" && req.Descriptor != nil:
		return target{}, errors.New("give key or descriptor, not both")
	case req.Descriptor != nil:
		for _, e := range req.Descriptor {
			entries = append(entries, entry{key: e.Key, value: e.Value})
		}
		if !r.matches(entries) {
			return target{}, fmt.Errorf("descriptor: does not match policy %q (%s)", r.name, describeMatch(r.match))
		}
	case req.Key == "":
		return target{}, errors.New("key: empty")
	case len(r.match) != 1:
		return target{}, fmt.Errorf("policy %q matches descriptors of %d entries: give \"descriptor\" (%s)", r.name, len(r.match), describeMatch(r.match))
	default:
		entries = []entry{{key: r.match[0].Key, value: req.Key}}
		if !r.matches(entries) {
			return target{}, fmt.Errorf("key: %q does not match policy %q (%s)", req.Key, r.name, describeMatch(r.match))
		}
	}
	if first := rs.match(entries); first != r {
		return target{}, fmt.Errorf("%s is matched first by policy %q, as a gRPC descriptor is: decide it there, not under %q",
			describeEntries(entries), first.name, r.name)
	}
	return rs.target(r, entries), nil
}

// describeMatch writes a policy's match as key=value entries, "key=*" for
// any value.
func describeMatch(match []MatchEntry) string {
	parts := make([]string, len(match))
	for i, m := range match {
		v := m.Value
		if v == "" {
			v = "*"
		}
		parts[i] = m.Key + "=" + v
	}
	return strings.Join(parts, ", ")
}

func boundValue(v string) string {
	if len(v) <= maxValueBytes && !strings.HasPrefix(v, "sha256:") {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:])
}
