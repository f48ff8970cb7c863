package httplimit

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/multilimit"
)

// FileConfig is the shape of a policy file, YAML or JSON (JSON is YAML):
//
//	policies:
//	  - name: per-ip
//	    algorithm: tokenbucket   # or gcra, fixedwindow, slidingcounter, slidinglog
//	    rate: 100
//	    period: 1m
//	    burst: 20                # default: rate
//	    cost: 1                  # default: 1
//	    key: remote-addr         # or "header:X-API-Key"
//	    routes: ["POST /orders"] # net/http ServeMux patterns; none: every route
//	    coalesce: true           # concurrent requests share script calls (package coalesce)
type FileConfig struct {
	Policies []FilePolicy `yaml:"policies" json:"policies"`
}

// FilePolicy is one policy of a [FileConfig].
type FilePolicy struct {
	Name      string   `yaml:"name" json:"name"`
	Algorithm string   `yaml:"algorithm" json:"algorithm"`
	Rate      int64    `yaml:"rate" json:"rate"`
	Period    string   `yaml:"period" json:"period"`
	Burst     int64    `yaml:"burst" json:"burst"`
	Cost      int64    `yaml:"cost" json:"cost"`
	Key       string   `yaml:"key" json:"key"`
	Routes    []string `yaml:"routes" json:"routes"`
	// Coalesce wraps the policy's limiter in coalesce.New: decisions stay
	// exact, and concurrent requests share script calls.
	Coalesce bool `yaml:"coalesce" json:"coalesce"`
}

// Routed is a set of policies, each applying to the routes it names.
type Routed struct {
	policies []routedPolicy
}

type routedPolicy struct {
	Policy
	routes *http.ServeMux // nil: every route
}

// Load parses a policy file (YAML or JSON) and builds each policy's
// limiter on store. Unknown fields, algorithms and keys are errors.
func Load(data []byte, store sluice.Store) (*Routed, error) {
	var fc FileConfig
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("httplimit: parse policies: %w", err)
	}
	if len(fc.Policies) == 0 {
		return nil, fmt.Errorf("httplimit: the file defines no policy")
	}
	rt := &Routed{}
	for i, fp := range fc.Policies {
		p, err := fp.build(store)
		if err != nil {
			return nil, fmt.Errorf("httplimit: policy %d (%q): %w", i+1, fp.Name, err)
		}
		rp := routedPolicy{Policy: p}
		if len(fp.Routes) > 0 {
			rp.routes = http.NewServeMux()
			for _, pattern := range fp.Routes {
				if err := register(rp.routes, pattern); err != nil {
					return nil, fmt.Errorf("httplimit: policy %q: route %q: %v", fp.Name, pattern, err)
				}
			}
		}
		rt.policies = append(rt.policies, rp)
	}
	return rt, nil
}

// register adds pattern to mux, turning its panic on a bad pattern into an
// error.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return nil
}

func (fp FilePolicy) build(store sluice.Store) (Policy, error) {
	period, err := time.ParseDuration(fp.Period)
	if err != nil {
		return Policy{}, fmt.Errorf("period %q: %w", fp.Period, err)
	}
	burst := fp.Burst
	if burst == 0 {
		burst = fp.Rate
	}
	var limiter sluice.Limiter
	switch fp.Algorithm {
	case "", "tokenbucket":
		limiter, err = tokenbucket.New(store)
	case "gcra":
		limiter, err = gcra.New(store)
	case "fixedwindow":
		limiter, err = fixedwindow.New(store)
	case "slidingcounter":
		limiter, err = slidingcounter.New(store)
	case "slidinglog":
		limiter, err = slidinglog.New(store)
	default:
		return Policy{}, fmt.Errorf("unknown algorithm %q", fp.Algorithm)
	}
	if err != nil {
		return Policy{}, err
	}
	var decider sluice.Limiter = limiter
	if fp.Coalesce {
		if decider, err = coalesce.New(limiter); err != nil {
			return Policy{}, err
		}
	}
	var key KeyFunc
	switch {
	case fp.Key == "" || fp.Key == "remote-addr":
		key = RemoteAddr()
	case strings.HasPrefix(fp.Key, "header:") && len(fp.Key) > len("header:"):
		key = Header(strings.TrimPrefix(fp.Key, "header:"))
	default:
		return Policy{}, fmt.Errorf("unknown key %q (remote-addr or header:Name)", fp.Key)
	}
	p := Policy{Name: fp.Name, Limiter: decider, Limit: sluice.Limit{Rate: fp.Rate, Period: period, Burst: burst}, Cost: fp.Cost, Key: key,
		Algorithm: multilimit.Algorithm(fp.Algorithm)}
	if p.Cost == 0 {
		p.Cost = 1
	}
	return p, p.validate()
}

// Policies returns the loaded policies, in file order, each with the
// limiter built for it.
func (rt *Routed) Policies() []Policy {
	out := make([]Policy, len(rt.policies))
	for i, p := range rt.policies {
		out[i] = p.Policy
	}
	return out
}

// Middleware returns middleware that checks each request against the
// policies whose routes match it, in file order.
func (rt *Routed) Middleware(opts ...Option) (func(http.Handler) http.Handler, error) {
	all := make([]Policy, len(rt.policies))
	for i, rp := range rt.policies {
		all[i] = rp.Policy
	}
	// One middleware per policy, so that each keeps its own validation;
	// chosen per request by route.
	per := make([]func(http.Handler) http.Handler, len(rt.policies))
	for i := range rt.policies {
		mw, err := Middleware(all[i:i+1], opts...)
		if err != nil {
			return nil, err
		}
		per[i] = mw
	}
	return func(next http.Handler) http.Handler {
		// Build the chain from the last policy inwards, each applying
		// only where its routes match.
		h := next
		for i := len(rt.policies) - 1; i >= 0; i-- {
			limited, plain, routes := per[i](h), h, rt.policies[i].routes
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if routes != nil {
					if _, pattern := routes.Handler(r); pattern == "" {
						plain.ServeHTTP(w, r)
						return
					}
				}
				limited.ServeHTTP(w, r)
			})
		}
		return h
	}, nil
}
