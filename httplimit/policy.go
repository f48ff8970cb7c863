package httplimit

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
)

// policy is a Policy checked and ready to serve.
type policy struct {
	Policy
	routes *http.ServeMux   // nil: every request
	quota  quota            // of Limit, when the policy has no tiers
	tiers  map[string]*tier // by name; nil: no tiers
	costs  *http.ServeMux   // Costs' routes, each handled by its costHandler; nil: none
}

// quota is how a policy's limit reads in the RateLimit fields.
type quota struct {
	// q is the most a client may spend at once: the burst of a bucket,
	// the rate of a window algorithm. RateLimit's r never exceeds it.
	q int64
	// w is the window, in whole seconds, over which q is granted: for a
	// bucket the time it takes to refill q, Burst × Period / Rate; for a
	// window algorithm its Period. Rounded up, so that a client pacing
	// itself by q per w never exceeds the limit.
	w int64
	// refills says that quota comes back continuously, one unit every
	// interval (the token bucket, GCRA); otherwise (the window
	// algorithms) it is only known to be back in full by ResetAfter.
	refills  bool
	interval time.Duration
}

// preparePolicies checks policies and fills their defaults.
func preparePolicies(policies []Policy) ([]*policy, error) {
	ps := make([]*policy, 0, len(policies))
	names := map[string]bool{}
	for i, p := range policies {
		prepared, err := preparePolicy(p)
		if err != nil {
			return nil, err
		}
		if names[p.Name] {
			return nil, fmt.Errorf("httplimit: policy %d: name %q is taken by an earlier policy: two policies of one name would count in one Redis key", i+1, p.Name)
		}
		names[p.Name] = true
		ps = append(ps, prepared)
	}
	return ps, nil
}

func preparePolicy(p Policy) (*policy, error) {
	if !ValidPolicyName(p.Name) {
		return nil, fmt.Errorf("httplimit: policy name %q: use 1 to 64 letters, digits, '-', '_' or '.'", p.Name)
	}
	if p.Limiter == nil {
		return nil, fmt.Errorf("httplimit: policy %q: limiter: none given", p.Name)
	}
	if p.Cost < 0 {
		return nil, fmt.Errorf("httplimit: policy %q: cost: %d is negative", p.Name, p.Cost)
	}
	if p.Cost == 0 {
		p.Cost = 1
	}
	if p.Key == nil {
		p.Key = RemoteAddr()
	}
	prepared := &policy{Policy: p}
	if err := prepareLimits(p, prepared); err != nil {
		return nil, err
	}
	if len(p.Routes) > 0 {
		prepared.routes = http.NewServeMux()
		for _, pattern := range p.Routes {
			if err := register(prepared.routes, pattern); err != nil {
				return nil, fmt.Errorf("httplimit: policy %q: route %q: %v", p.Name, pattern, err)
			}
		}
	}
	return prepared, nil
}

// matches reports whether the policy applies to r.
func (p *policy) matches(r *http.Request) bool {
	if p.routes == nil {
		return true
	}
	_, pattern := p.routes.Handler(r)
	return pattern != ""
}

// quotaOf reads limit as the RateLimit fields state it. Whether quota
// refills continuously is asked of the limiter (through any decorators):
// a bucket's capacity is its Burst, a window algorithm's its Rate, so a
// limit whose two differ tells them apart. A limiter that cannot say is
// treated as a window algorithm, whose figures are the more cautious, and
// known is false.
func quotaOf(l sluice.Limiter, limit sluice.Limit) (q quota, known bool) {
	refills := false
	if b, ok := sluice.As[sluice.Bounded](l); ok {
		probe := sluice.Limit{Rate: 1, Period: time.Second, Burst: 2}
		if c, err := b.Capacity("httplimit", probe); err == nil {
			refills, known = c == probe.Burst, true
		}
	}
	return newQuota(limit, refills), known
}

func newQuota(limit sluice.Limit, refills bool) quota {
	q := quota{refills: refills, q: limit.Rate, interval: limit.Period / time.Duration(limit.Rate)}
	window := limit.Period.Seconds()
	if refills {
		q.q = limit.Burst
		window = float64(limit.Burst) * limit.Period.Seconds() / float64(limit.Rate)
	}
	q.w = int64(math.Ceil(window))
	return q
}

// register adds pattern to mux, turning its panic on a bad pattern into an
// error.
func register(mux *http.ServeMux, pattern string) error {
	return registerHandler(mux, pattern, http.NotFoundHandler())
}

// registerHandler adds pattern to mux with h, turning its panic on a bad
// pattern, or one that conflicts with another, into an error.
func registerHandler(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// ValidPolicyName reports whether s can name a policy: 1 to 64 letters,
// digits, '-', '_' or '.', so that it is safe in headers (an RFC 9651
// string) and in Redis keys.
func ValidPolicyName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
