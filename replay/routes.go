package replay

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/sluicehq/sluice/replay/accesslog"
)

// routeMatcher says which policies a record is subject to, with the
// ServeMux patterns httplimit matches (a policy without routes applies to
// every record). A record with a path is matched as a request for it; a
// record with only a logged route applies to the policies that list that
// exact pattern. Answers are cached per method, path and route, and the
// cache is emptied when it reaches maxRouteCache entries, so that paths
// with identifiers in them cost memory bounded by the cache.
type routeMatcher struct {
	all    uint64           // policies without routes
	every  bool             // no policy has routes
	muxes  []*http.ServeMux // per policy, nil without routes
	routes []map[string]bool
	cache  map[routeKey]uint64
	req    *http.Request
}

type routeKey struct{ method, path, route string }

const maxRouteCache = 1 << 16

func newRouteMatcher(policies []Policy) (*routeMatcher, error) {
	m := &routeMatcher{muxes: make([]*http.ServeMux, len(policies)), routes: make([]map[string]bool, len(policies)),
		cache: map[routeKey]uint64{}, req: routeRequest(), every: true}
	for i, p := range policies {
		if len(p.Routes) == 0 {
			m.all |= 1 << i
			continue
		}
		m.every = false
		m.muxes[i] = http.NewServeMux()
		m.routes[i] = map[string]bool{}
		for _, pattern := range p.Routes {
			if err := register(m.muxes[i], pattern); err != nil {
				return nil, fmt.Errorf("replay: policy %q: route %q: %v", p.Name, pattern, err)
			}
			m.routes[i][pattern] = true
		}
	}
	return m, nil
}

// match returns the policies rec is subject to, one bit each.
func (m *routeMatcher) match(rec *accesslog.Record) uint64 {
	if m.every {
		return m.all
	}
	k := routeKey{rec.Method, rec.Path, rec.Route}
	if mask, ok := m.cache[k]; ok {
		return mask
	}
	mask := m.all
	if rec.Path != "" {
		m.req.Method = rec.Method
		m.req.URL = &url.URL{Path: rec.Path}
		m.req.Host = ""
	}
	for i, mux := range m.muxes {
		switch {
		case mux == nil:
		case rec.Path != "":
			if _, pattern := mux.Handler(m.req); pattern != "" {
				mask |= 1 << i
			}
		case m.routes[i][rec.Route]:
			mask |= 1 << i
		}
	}
	if len(m.cache) >= maxRouteCache {
		clear(m.cache)
	}
	m.cache[k] = mask
	return mask
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

// costMatcher is a policy's cost of a request: the cost of the Costs
// route ServeMux matches, or its Cost. Like httplimit, it refuses routes
// that conflict. Answers are cached as the
// route matcher's are.
type costMatcher struct {
	cost  int64 // the policy's, at least 1
	mux   *http.ServeMux
	byPat map[string]int64
	cache map[routeKey]int64
	req   *http.Request
}

func newCostMatcher(p Policy) (*costMatcher, error) {
	m := &costMatcher{cost: max(p.Cost, 1)}
	if len(p.Costs) == 0 {
		return m, nil
	}
	m.mux, m.byPat, m.cache, m.req = http.NewServeMux(), map[string]int64{}, map[routeKey]int64{}, routeRequest()
	for _, c := range p.Costs {
		if err := register(m.mux, c.Route); err != nil {
			return nil, fmt.Errorf("replay: policy %q: cost route %q: %v", p.Name, c.Route, err)
		}
		m.byPat[c.Route] = c.Cost
	}
	return m, nil
}

// of returns the cost of a request of method and path, or of a logged
// route when there is no path.
func (m *costMatcher) of(method, path, route string) int64 {
	if m.mux == nil {
		return m.cost
	}
	k := routeKey{method, path, route}
	if c, ok := m.cache[k]; ok {
		return c
	}
	c := m.cost
	pattern := route
	if path != "" {
		m.req.Method, m.req.URL, m.req.Host = method, &url.URL{Path: path}, ""
		_, pattern = m.mux.Handler(m.req)
	}
	if rc, ok := m.byPat[pattern]; ok {
		c = rc
	}
	if len(m.cache) >= maxRouteCache {
		clear(m.cache)
	}
	m.cache[k] = c
	return c
}
