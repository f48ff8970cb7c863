package httplimit

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// Tier is one limit of a policy with [Policy.Tiers]: a plan, such as free
// or pro, that the request's client is on.
type Tier struct {
	// Name identifies the tier in the policy's store keys: letters,
	// digits, '-', '_' or '.', at most 64, unique among the policy's tiers.
	Name string
	// Limit is the tier's limit, refused as [Policy.Limit] is.
	Limit sluice.Limit
}

// TierFunc chooses the tier of a request from the request and the key the
// policy's key function derived, e.g. by looking the key's plan up. "" is
// the policy's DefaultTier. An error is answered as a key function's:
// 400, with the reason of a [NoKeyError]; 500 when it wraps
// [ErrKeyMisconfigured] (a lookup that fails for a reason of the server's
// should wrap it).
type TierFunc func(r *http.Request, key string) (string, error)

// ErrUnknownTier is wrapped by the error of a request whose TierFunc chose
// a tier its policy does not have: the server's fault, answered 500 and
// logged, as a key function that cannot work on this server is.
var ErrUnknownTier = errors.New("httplimit: the tier function chose a tier the policy does not have")

// RouteCost is the cost of the requests of one route under a policy
// ([Policy.Costs]).
type RouteCost struct {
	// Route is a net/http ServeMux pattern: "POST /reports",
	// "/users/{id}".
	Route string `yaml:"route" json:"route"`
	// Cost is what one request of Route costs: at least 1, and at most
	// what every limit of the policy can ever allow.
	Cost int64 `yaml:"cost" json:"cost"`
}

// tier is a Tier checked and ready to serve.
type tier struct {
	name  string
	limit sluice.Limit
	quota quota
}

// costHandler is the handler a Costs route is registered with in a
// policy's cost mux: the route's cost.
type costHandler int64

func (costHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// target is what one request is decided by under one policy.
type target struct {
	clientKey string // what the key function derived, for logs
	tier      string // the chosen tier's name; "": no tiers
	storeKey  string
	limit     sluice.Limit
	quota     quota
	cost      int64
}

// prepareLimits checks p's limit or tiers and its costs, and fills in
// prepared's quota or tiers and its cost mux. Every cost (Cost and each of
// Costs) must be one that every limit can ever allow.
func prepareLimits(p Policy, prepared *policy) error {
	fail := func(field string, err error) error {
		return fmt.Errorf("httplimit: policy %q: %s: %w", p.Name, field, err)
	}
	if len(p.Tiers) == 0 && (p.TierOf != nil || p.DefaultTier != "") {
		return fail("tiers", errors.New("none given, but TierOf or DefaultTier is: they choose among tiers"))
	}
	if len(p.Tiers) > 0 {
		switch {
		case p.Limit != sluice.Limit{}:
			return fail("limit", errors.New("give Limit or Tiers, not both: each tier has its limit"))
		case p.TierOf == nil:
			return fail("tier_of", errors.New("none given: with tiers, a function must choose the tier of a request"))
		case p.DefaultTier == "":
			return fail("default_tier", errors.New("none given: name the tier of requests that no tier is chosen for"))
		}
	}
	if err := prepareCosts(p, prepared); err != nil {
		return err
	}
	if len(p.Tiers) == 0 {
		q, err := checkLimit(p, p.Limit)
		if err != nil {
			return fmt.Errorf("httplimit: policy %q: %w", p.Name, err)
		}
		prepared.quota = q
		return nil
	}
	prepared.tiers = make(map[string]*tier, len(p.Tiers))
	for _, t := range p.Tiers {
		if !ValidPolicyName(t.Name) {
			return fail("tiers", fmt.Errorf("name %q: use 1 to 64 letters, digits, '-', '_' or '.'", t.Name))
		}
		if prepared.tiers[t.Name] != nil {
			return fail("tiers", fmt.Errorf("name %q is taken by an earlier tier: two tiers of one name would count in one key", t.Name))
		}
		q, err := checkLimit(p, t.Limit)
		if err != nil {
			return fail(fmt.Sprintf("tier %q", t.Name), err)
		}
		prepared.tiers[t.Name] = &tier{name: t.Name, limit: t.Limit, quota: q}
	}
	if prepared.tiers[p.DefaultTier] == nil {
		return fail("default_tier", fmt.Errorf("%q is not one of the policy's tiers", p.DefaultTier))
	}
	return nil
}

// checkLimit checks one limit of p (its Limit or a tier's) and every cost
// of p under it, and returns its quota. Its errors start with the field.
func checkLimit(p Policy, limit sluice.Limit) (quota, error) {
	if err := limit.Validate(); err != nil {
		return quota{}, fmt.Errorf("limit: %w", err)
	}
	q, known := quotaOf(p.Limiter, limit)
	if known && !q.refills && limit.Burst != limit.Rate {
		return quota{}, fmt.Errorf("burst: %d, but this algorithm has no burst (it allows Rate per Period): set it to the rate, %d, or leave it out",
			limit.Burst, limit.Rate)
	}
	if err := ext.CheckRequest(p.Limiter, "httplimit", limit, p.Cost); err != nil {
		return quota{}, fmt.Errorf("cost: %w", err)
	}
	for _, c := range p.Costs {
		if err := ext.CheckRequest(p.Limiter, "httplimit", limit, c.Cost); err != nil {
			return quota{}, fmt.Errorf("cost of route %q: %w", c.Route, err)
		}
	}
	return q, nil
}

// prepareCosts registers p's route costs in a mux of their own, which
// refuses what ServeMux refuses: a bad pattern, or two that conflict (the
// same route twice included).
func prepareCosts(p Policy, prepared *policy) error {
	if len(p.Costs) == 0 {
		return nil
	}
	prepared.costs = http.NewServeMux()
	for _, c := range p.Costs {
		if c.Cost < 1 {
			return fmt.Errorf("httplimit: policy %q: cost of route %q: %d: a route's cost is at least 1", p.Name, c.Route, c.Cost)
		}
		if err := registerHandler(prepared.costs, c.Route, costHandler(c.Cost)); err != nil {
			return fmt.Errorf("httplimit: policy %q: cost of route %q: %v", p.Name, c.Route, err)
		}
	}
	return nil
}

// target derives what r is decided by under p: its key, its tier's limit
// and quota, and its route's cost. A key or tier that cannot be had is an
// error for [config.keyError].
func (p *policy) target(r *http.Request) (target, error) {
	key, err := p.Key(r)
	if err != nil {
		return target{}, err
	}
	t := target{clientKey: key, cost: p.Cost, limit: p.Limit, quota: p.quota}
	if p.costs != nil {
		if h, _ := p.costs.Handler(r); h != nil {
			if c, ok := h.(costHandler); ok {
				t.cost = int64(c)
			}
		}
	}
	if p.tiers == nil {
		t.storeKey = sluice.Key(key, "http", p.Name)
		return t, nil
	}
	name, err := p.TierOf(r, key)
	if err != nil {
		return target{}, err
	}
	if name == "" {
		name = p.DefaultTier
	}
	chosen := p.tiers[name]
	if chosen == nil {
		return target{}, fmt.Errorf("%w: policy %q has no tier %q", ErrUnknownTier, p.Name, name)
	}
	t.storeKey = sluice.Key(key, "http", p.Name, chosen.name)
	t.tier, t.limit, t.quota = chosen.name, chosen.limit, chosen.quota
	return t, nil
}
