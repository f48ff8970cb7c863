package envoyratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

// TestParseOverlay: an overlay file gives a stack.Spec per rule name or
// stat key, every field but rate, period and cost, read strictly.
func TestParseOverlay(t *testing.T) {
	got, err := ParseOverlay([]byte(`
rules:
  edge.user_id:
    algorithm: tokenbucket
    burst: 20
  per_user:
    algorithm: gcra
    coalesce: true
    lease: 10
    shards: 4
    hot_keys: [acme]
    deny_cache: true
    fallback: local
    fallback_timeout: 50ms
    replicas: 3
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]stack.Spec{
		"edge.user_id": {Algorithm: "tokenbucket", Burst: 20},
		"per_user": {Algorithm: "gcra", Coalesce: true, Lease: 10, Shards: 4, HotKeys: []string{"acme"}, DenyCache: true,
			Fallback: "local", FallbackTimeout: stack.Duration(50 * time.Millisecond), Replicas: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(want), got)
	}
	for k, w := range want {
		g := got[k]
		if g.Algorithm != w.Algorithm || g.Burst != w.Burst || g.Coalesce != w.Coalesce || g.Lease != w.Lease || g.Shards != w.Shards ||
			strings.Join(g.HotKeys, ",") != strings.Join(w.HotKeys, ",") || g.DenyCache != w.DenyCache || g.Fallback != w.Fallback ||
			g.FallbackTimeout != w.FallbackTimeout || g.Replicas != w.Replicas {
			t.Fatalf("%s: got %+v, want %+v", k, g, w)
		}
	}
}

// TestParseOverlayRefuses: what an overlay may not say is an error naming
// the entry and the field.
func TestParseOverlayRefuses(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"empty", "", "the file is empty"},
		{"no rules", "other: 1\n", "field other not found"},
		{"rules missing", "{}\n", `no "rules"`},
		{"rules a list", "rules: [a]\n", `"rules" must be a mapping`},
		{"rules empty", "rules: {}\n", `"rules" is empty`},
		{"rate", "rules:\n  a:\n    rate: 5\n", `"a": rate: the limit is the rule's rate_limit`},
		{"period", "rules:\n  a:\n    period: 1m\n", `"a": period:`},
		{"cost", "rules:\n  a:\n    cost: 2\n", `"a": cost:`},
		{"unknown field", "rules:\n  a:\n    algoritm: gcra\n", `"a": yaml: unmarshal errors:`},
		{"fraction", "rules:\n  a:\n    burst: 2.5\n", `"a": burst:`},
		{"no fields", "rules:\n  a: {}\n", `"a" (line 2): give a mapping of stack fields`},
		{"a scalar entry", "rules:\n  a: gcra\n", `"a" (line 2): give a mapping`},
		{"twice", "rules:\n  a: {burst: 1}\n  a: {burst: 2}\n", `"a" (line 3): given twice`},
		{"two documents", "rules:\n  a: {burst: 1}\n---\nrules: {}\n", "more than one document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseOverlay([]byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestOverlayStopsTheBoundaryBurst: under envoyproxy/ratelimit's 100 per
// MINUTE, 100 requests in the last second of a minute and 100 in the first
// of the next are all admitted by its fixed window, 200 in two seconds;
// the same rule decided by a token bucket through an overlay admits the
// burst of 100 and what refilled in those two seconds, about 3 more.
func TestOverlayStopsTheBoundaryBurst(t *testing.T) {
	files := []config.File{{Path: "edge.yaml", Data: []byte(`domain: edge
descriptors:
  - key: user_id
    rate_limit: {unit: minute, requests_per_unit: 100}
`)}}
	admitted := func(overlay map[string]stack.Spec) int {
		clock := sluicetest.NewFakeClock(start.Add(59 * time.Second)) // the last second of a minute
		store, err := memstore.New(memstore.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(files, store, Options{Overlay: overlay, Clock: clock, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		f := &fixture{svc: svc, clock: clock, store: store}
		n := 0
		for i := range 200 {
			if i == 100 {
				clock.Advance(1500 * time.Millisecond) // into the next minute's first second
			}
			if f.call(t, req("edge", d("user_id", "alice"))).GetOverallCode() == ok {
				n++
			}
		}
		return n
	}
	fixed := admitted(nil)
	bucket := admitted(map[string]stack.Spec{"edge.user_id": {Algorithm: "tokenbucket"}})
	t.Logf("100 per MINUTE, 100 requests either side of a minute boundary, 1.5 s apart: fixed window admitted %d, token bucket %d", fixed, bucket)
	if fixed != 200 {
		t.Fatalf("the fixed window admitted %d, want all 200 (its boundary burst)", fixed)
	}
	// 100 of the burst, plus 100/min × 1.5 s = 2.5 tokens refilled.
	if bucket < 100 || bucket > 103 {
		t.Fatalf("the token bucket admitted %d, want 100 plus what refilled in 1.5 s (at most 103)", bucket)
	}
}

// TestReloadOverlay: a reload takes the files and a new overlay together,
// or neither: an overlay naming no rule is refused and the stacks in force
// are kept.
func TestReloadOverlay(t *testing.T) {
	f := newFixture(t, Options{})
	codes := func() string {
		var got []string
		for range 11 {
			got = append(got, f.call(t, req("api", d("per_min", "y"))).GetStatuses()[0].GetCode().String())
		}
		return strings.Join(got, ",")
	}
	if got := codes(); strings.Count(got, "OVER_LIMIT") != 1 {
		t.Fatalf("the fixed window of 10 per minute: %s", got)
	}
	err := f.svc.ReloadOverlay(apiFiles(t), map[string]stack.Spec{"nobody": {Algorithm: "gcra"}})
	if err == nil || !strings.Contains(err.Error(), `overlay "nobody": no rule`) {
		t.Fatalf("an overlay of no rule: %v", err)
	}
	if err := f.svc.ReloadOverlay(apiFiles(t), map[string]stack.Spec{"api.per_min": {Algorithm: "tokenbucket", Burst: 2}}); err != nil {
		t.Fatal(err)
	}
	if got := codes(); !strings.HasPrefix(got, "OK,OK,OVER_LIMIT") {
		t.Fatalf("after the overlay, a token bucket of burst 2 on a key of its own: %s", got)
	}
	// A plain Reload keeps the overlay in force.
	if err := f.svc.Reload(apiFiles(t)); err != nil {
		t.Fatal(err)
	}
	if got := f.call(t, req("api", d("per_min", "z"))).GetStatuses()[0].GetLimitRemaining(); got != 1 {
		t.Fatalf("after Reload, remaining %d, want 1 (the overlay's burst of 2, less this request)", got)
	}
}
