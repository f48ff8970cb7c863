//go:build unix

package envoydiff_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// exposed reads s's metrics and returns the series whose name has one of
// the prefixes, with their types; a counter still at zero is left out
// (gostats flushes only counters that moved: envoyproxy/ratelimit never
// exports one), a gauge is kept whatever its value (gostats flushes every
// gauge at every flush).
func (s *service) exposed(t *testing.T, prefixes ...string) map[string]sample {
	t.Helper()
	out := s.exposition(t, prefixes...)
	for name, x := range out {
		if x.typ == "counter" && x.v == 0 {
			delete(out, name)
		}
	}
	return out
}

// typedNames lists the series of m with their types, sorted.
func typedNames(m map[string]sample) []string {
	var out []string
	for name, s := range m {
		out = append(out, fmt.Sprintf("%s (%s)", name, s.typ))
	}
	sort.Strings(out)
	return out
}

// collectGarbage has s run a garbage collection (GET
// /debug/pprof/heap?gc=1 on its debug listener): then both processes'
// gostats GC counters (numGC, pauseTotalNs) have moved.
func (s *service) collectGarbage(t *testing.T) {
	t.Helper()
	code, _, err := httpDo(http.MethodGet, "http://"+s.debugAddr+"/debug/pprof/heap?gc=1", "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s: GET /debug/pprof/heap?gc=1: %d %v", s.name, code, err)
	}
}

// sameProcessMetrics fails t unless theirs, once flushed, and ours
// expose the same series (name and type) of prefixes, and returns them.
func (p *pair) sameProcessMetrics(t *testing.T, prefixes ...string) (theirs, ours map[string]sample) {
	t.Helper()
	p.theirs.flushed(t)
	theirs, ours = p.theirs.exposed(t, prefixes...), p.ours.exposed(t, prefixes...)
	theirNames, ourNames := typedNames(theirs), typedNames(ours)
	if strings.Join(theirNames, "\n") != strings.Join(ourNames, "\n") {
		t.Fatalf("the series %v differ:\ntheirs:\n  %s\nours:\n  %s", prefixes,
			strings.Join(theirNames, "\n  "), strings.Join(ourNames, "\n  "))
	}
	return theirs, ours
}

// poolCounts describes the ratelimit_redis_pool_* series of m.
func poolCounts(m map[string]sample) string {
	var out []string
	for _, name := range []string{"cx_active", "cx_total", "cx_local_close"} {
		out = append(out, fmt.Sprintf("%s %g", name, m["ratelimit_redis_pool_"+name].v))
	}
	return strings.Join(out, ", ")
}

// TestProcessMetrics holds the series envoyproxy/ratelimit exports about
// its process, besides its service's, with USE_PROMETHEUS=true on Redis:
// its Redis pool's (ratelimit_redis_pool_cx_active, a gauge of the
// connections open; ratelimit_redis_pool_cx_total and
// ratelimit_redis_pool_cx_local_close, counters of the connections made
// and closed) and gostats' runtime stats (ratelimit_go_*, from
// runtime.MemStats and NumGoroutine), each named as its statsd exporter
// names them. Both expose the same series, of the same types; the values
// differ (theirs' radix pool opens REDIS_POOL_SIZE connections at start,
// go-redis as calls need them), but each has a connection open once it
// answered a request. Once each one's Redis killed its connections and
// it answered again, each counts a connection closed.
func TestProcessMetrics(t *testing.T) {
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}})
	for _, s := range p.both() {
		if r := s.send(t, overGRPC, buildRequest("diff", desc("user", "process-metrics"))); codesOf(r) != "OK [OK 2]" {
			t.Fatalf("%s answered %s %s", s.name, codesOf(r), r.body)
		}
		s.collectGarbage(t)
	}
	prefixes := []string{"ratelimit_redis_pool_", "ratelimit_go_"}
	theirs, ours := p.sameProcessMetrics(t, prefixes...)
	t.Logf("the series:\n  %s", strings.Join(typedNames(theirs), "\n  "))
	t.Logf("theirs: %s; ours: %s", poolCounts(theirs), poolCounts(ours))
	atLeastOne(t, theirs, ours, "ratelimit_redis_pool_cx_active", "after a request")

	// Each one's Redis closes every connection of its clients; each
	// service finds out at its next calls (which may fail) and dials
	// again.
	for _, r := range []redisTarget{p.theirRedis, p.ourRedis} {
		if _, err := r.server.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range p.both() {
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; ; i++ {
			r := s.send(t, overGRPC, buildRequest("diff", desc("user", fmt.Sprintf("after-kill-%d", i))))
			if codesOf(r) == "OK [OK 2]" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still answers %s %s 20 s after CLIENT KILL", s.name, codesOf(r), r.body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	theirs, ours = p.sameProcessMetrics(t, prefixes...)
	t.Logf("after CLIENT KILL: theirs: %s; ours: %s", poolCounts(theirs), poolCounts(ours))
	atLeastOne(t, theirs, ours, "ratelimit_redis_pool_cx_local_close", "after CLIENT KILL")
	atLeastOne(t, theirs, ours, "ratelimit_redis_pool_cx_active", "after a request")
}

// atLeastOne fails t unless series name is at least 1 in both theirs and
// ours, when says at what point.
func atLeastOne(t *testing.T, theirs, ours map[string]sample, name, when string) {
	t.Helper()
	for who, m := range map[string]map[string]sample{"theirs": theirs, "ours": ours} {
		if v := m[name].v; v < 1 {
			t.Fatalf("%s: %s is %g %s; want at least 1", who, name, v, when)
		}
	}
}
