// Package replay decides the requests of an access log under rate-limit
// policies and algorithms, in simulated time, to answer "what would this
// limit have done to our traffic": who would have been denied, how often,
// and whether it would have held the worst burst.
//
// Every request is decided on the algorithms' Go twins (the decisions the
// Lua scripts make on Redis, as the conformance suite and the fuzz tests
// hold), with the request's logged time as the script's now argument, so
// no Redis is needed and a replay is deterministic. Each policy is replayed
// under its own algorithm and, unless Config.Algorithms says otherwise,
// under every other algorithm at the same limit.
//
// Memory: each subject's limiter state is dropped as it expires in
// simulated time, as Redis would drop the keys, and the report's per-key
// figures are kept exactly for up to Config.MaxKeys keys; past it, keys
// idle for a period are forgotten, their figures final, and the counts of
// distinct keys become estimates (see Result.DroppedKeys and
// Result.Estimated). A log of any length replays in memory bounded by
// MaxKeys and the keys active within a period.
package replay

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/replay/accesslog"
)

// Policy is a limit to replay, as a policy file states it.
type Policy struct {
	// Name names the policy in the report.
	Name string
	// Routes are the net/http ServeMux patterns of the requests it applies
	// to, as in httplimit; none: every request.
	Routes []string
	// Algorithm is the policy's algorithm ("" is the token bucket).
	Algorithm string
	// Limit is the policy's limit. Replayed under a window algorithm,
	// which has no burst, its Burst is taken to be its Rate.
	Limit sluice.Limit
	// Cost is what one request costs (0 means 1); a record's own cost
	// (a logged cost field) multiplies it.
	Cost int64
	// Costs are particular routes' costs, in place of Cost for the
	// requests they match (as ServeMux matches), as httplimit's
	// Policy.Costs: one budget, charged more by some routes.
	Costs []RouteCost
	// KeyedBy is how a policy file keys the policy: "remote-addr" or
	// "header:Name" (LoadPolicies sets it). The replay keys the policy by
	// the record's key KeyIndex; the caller checks that the two agree.
	KeyedBy string
	// KeyIndex is which of a record's keys keys the policy: 0 is
	// Record.Key, i > 0 is Record.Keys[i] (a reader with
	// accesslog.Options.KeysFrom, one key per way the policies are
	// keyed). A record without that key ends the replay with an error.
	KeyIndex int
	// Shadow: a dry run (httplimit's Policy.Shadow). Its denials are
	// reported but stop nothing: the policies after it see every request.
	Shadow bool
	// TierOf, when set, limits the policy to the records whose key it
	// puts in Tier: a policy with tiers replays as one Policy per tier,
	// each with its tier's limit, as each tier keeps its own state.
	TierOf func(key string) string
	Tier   string
}

// RouteCost is the cost of one route's requests under a policy.
type RouteCost struct {
	Route string // a ServeMux pattern
	Cost  int64  // at least 1
}

// Config says what to replay.
type Config struct {
	// Policies are replayed in order; at most 64.
	Policies []Policy
	// Algorithms each policy is replayed under. nil: its own algorithm
	// first, then every other at the same limit (algorithms.Names).
	Algorithms []string
	// Target, in (0, 1), also replays each policy and algorithm at
	// limits from a sixteenth to sixteen times the policy's (a step of
	// 2^(1/4), burst scaled with the rate) and reports the smallest at
	// which at most this share of keys is ever denied (Result.Target).
	// 0: no target. It costs one more decision per request and step.
	Target float64
	// TopKeys is how many keys Result.TopKeys lists (0: 10; negative:
	// none).
	TopKeys int
	// MaxKeys bounds the keys whose figures the report keeps: past it,
	// keys idle for longer than the policy's period are counted in the
	// totals and forgotten (default 1<<17, about 25 MB per subject).
	MaxKeys int
	// Observe, when set, is called with every decision of every subject:
	// concurrently across subjects, in log order within one.
	Observe func(Decision)
	// Progress, when set, is called about every ProgressEvery records
	// (default 1<<16) from the goroutine reading the log.
	Progress      func(Progress)
	ProgressEvery int64
}

// Decision is one request decided under one subject.
type Decision struct {
	Policy, Algorithm string
	Line              int64 // the record's line in the log
	Key               string
	Time              time.Time // the simulated time it was decided at
	Cost              int64
	Allowed           bool
	// OverCapacity: the cost exceeds what the limit can ever allow; the
	// request is denied and no state moves.
	OverCapacity bool
}

// Progress is how far a replay has read.
type Progress struct {
	Records, Skipped int64
}

// Source yields the records of a log in order; *accesslog.Reader is one.
type Source interface {
	Next() (accesslog.Record, bool)
	Err() error
}

// Skipper is a Source that reports the lines it could not parse.
type Skipper interface {
	Skipped() (int64, []accesslog.LineError)
}

// Limits on a Config.
const (
	MaxPolicies    = 64
	defaultTopKeys = 10
	defaultMaxKeys = 1 << 17
)

// subject is one policy under one algorithm.
type subject struct {
	policy    int
	algorithm string
	limit     sluice.Limit // as this algorithm reads the policy's limit
	own       bool         // the policy's own algorithm
}

// check validates cfg and lists its subjects, with the policies' route
// matcher.
func (cfg *Config) check() ([]subject, *routeMatcher, error) {
	if len(cfg.Policies) == 0 {
		return nil, nil, errors.New("replay: no policy to replay")
	}
	if len(cfg.Policies) > MaxPolicies {
		return nil, nil, fmt.Errorf("replay: %d policies: at most %d", len(cfg.Policies), MaxPolicies)
	}
	if cfg.Target < 0 || cfg.Target >= 1 {
		return nil, nil, fmt.Errorf("replay: target %v: a share of keys in (0, 1), or 0 for none", cfg.Target)
	}
	if cfg.MaxKeys < 0 || cfg.ProgressEvery < 0 {
		return nil, nil, errors.New("replay: MaxKeys and ProgressEvery must not be negative")
	}
	for _, name := range cfg.Algorithms {
		if !slices.Contains(algorithms.Names, name) {
			return nil, nil, fmt.Errorf("replay: unknown algorithm %q (%v)", name, algorithms.Names)
		}
	}
	var subjects []subject
	names := map[string]bool{}
	for i, p := range cfg.Policies {
		if p.Name == "" || names[p.Name] {
			return nil, nil, fmt.Errorf("replay: policy %d: name %q is empty or taken", i+1, p.Name)
		}
		names[p.Name] = true
		if p.Cost < 0 {
			return nil, nil, fmt.Errorf("replay: policy %q: cost %d is negative", p.Name, p.Cost)
		}
		if p.KeyIndex < 0 {
			return nil, nil, fmt.Errorf("replay: policy %q: key index %d is negative", p.Name, p.KeyIndex)
		}
		for _, c := range p.Costs {
			if c.Cost < 1 {
				return nil, nil, fmt.Errorf("replay: policy %q: route %q: cost %d is below 1", p.Name, c.Route, c.Cost)
			}
		}
		if (p.TierOf == nil) != (p.Tier == "") {
			return nil, nil, fmt.Errorf("replay: policy %q: a tier needs TierOf, and TierOf a tier", p.Name)
		}
		own := p.Algorithm
		if own == "" {
			own = algorithms.Names[0]
		}
		if !slices.Contains(algorithms.Names, own) {
			return nil, nil, fmt.Errorf("replay: policy %q: unknown algorithm %q (%v)", p.Name, own, algorithms.Names)
		}
		list := cfg.Algorithms
		if list == nil {
			list = append([]string{own}, slices.DeleteFunc(slices.Clone(algorithms.Names), func(n string) bool { return n == own })...)
		}
		for _, alg := range list {
			limit := limitFor(alg, p.Limit)
			d, err := newDecider(alg, limit)
			if err == nil && alg == own {
				err = checkCosts(p, d)
			}
			if err != nil {
				if alg == own || cfg.Algorithms != nil {
					return nil, nil, fmt.Errorf("replay: policy %q: %w", p.Name, err)
				}
				continue // an alternative that cannot take this limit (a sliding log above its rate bound)
			}
			subjects = append(subjects, subject{policy: i, algorithm: alg, limit: limit, own: alg == own})
		}
	}
	routes, err := newRouteMatcher(cfg.Policies)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range cfg.Policies {
		if _, err := newCostMatcher(p); err != nil {
			return nil, nil, err
		}
	}
	return subjects, routes, nil
}

// checkCosts refuses a policy whose cost, or a route's, its own algorithm
// can never allow at its limit, as httplimit refuses it at load.
func checkCosts(p Policy, d *decider) error {
	if c := max(p.Cost, 1); c > d.capacity {
		return fmt.Errorf("cost %d exceeds %d, the most %s can ever allow at %s", c, d.capacity, d.spec.Name, d.limitString())
	}
	for _, rc := range p.Costs {
		if rc.Cost > d.capacity {
			return fmt.Errorf("route %q: cost %d exceeds %d, the most %s can ever allow at %s", rc.Route, rc.Cost, d.capacity, d.spec.Name, d.limitString())
		}
	}
	return nil
}

// limitFor is limit as algorithm reads it: the window algorithms have no
// burst, so theirs is the rate.
func limitFor(algorithm string, limit sluice.Limit) sluice.Limit {
	switch algorithm {
	case "fixedwindow", "slidingcounter", "slidinglog":
		limit.Burst = limit.Rate
	}
	return limit
}

// routeRequest is a reusable request for ServeMux matching.
func routeRequest() *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	return r
}
