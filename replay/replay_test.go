package replay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay/accesslog"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// records is a Source of records given in a test.
type records struct {
	recs []accesslog.Record
	i    int
}

func (s *records) Next() (accesslog.Record, bool) {
	if s.i >= len(s.recs) {
		return accesslog.Record{}, false
	}
	s.i++
	r := s.recs[s.i-1]
	if r.Line == 0 {
		r.Line = int64(s.i)
	}
	if r.Cost == 0 {
		r.Cost = 1
	}
	return r, true
}

func (s *records) Err() error { return nil }

// at is a record for key at t0 plus ms milliseconds.
func at(key string, ms int) accesslog.Record {
	return accesslog.Record{Time: t0.Add(time.Duration(ms) * time.Millisecond), Key: key, Method: "GET", Path: "/"}
}

// decisions replays recs and returns every decision per algorithm, in
// log order.
func decisions(t *testing.T, cfg Config, recs ...accesslog.Record) (*Report, map[string][]Decision) {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]Decision{}
	cfg.Observe = func(d Decision) {
		mu.Lock()
		defer mu.Unlock()
		got[d.Policy+"/"+d.Algorithm] = append(got[d.Policy+"/"+d.Algorithm], d)
	}
	rep, err := Run(context.Background(), &records{recs: recs}, cfg)
	require.NoError(t, err)
	return rep, got
}

func allowedOf(ds []Decision) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Allowed {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestKnownOutcomes(t *testing.T) {
	// 3 per second: four requests in the first 300 ms, two more at 1.0 s
	// and 1.1 s.
	recs := []accesslog.Record{at("a", 0), at("a", 100), at("a", 200), at("a", 300), at("a", 1000), at("a", 1100)}
	_, got := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(3)}}}, recs...)
	require.Equal(t, map[string]string{
		// The window resets at 1.0 s.
		"p/fixedwindow": "+++-++",
		// The last second is (now - 1 s, now]: at 1.0 s the request at 0 s
		// has left it, at 1.1 s the one at 0.1 s.
		"p/slidinglog": "+++-++",
		// A token comes back every 333.3 ms: by 1.0 s the bucket has three
		// again (taken at 0, 0.1 and 0.2 s), so 1.0 s and 1.1 s pass.
		"p/tokenbucket": "+++-++",
		"p/gcra":        "+++-++",
		// The previous window (3) weighs 100% at 1.0 s: 3 + 1 > 3, denied;
		// at 1.1 s 90%: 2.7 + 1 > 3, denied.
		"p/slidingcounter": "+++---",
	}, map[string]string{
		"p/fixedwindow": allowedOf(got["p/fixedwindow"]), "p/slidinglog": allowedOf(got["p/slidinglog"]),
		"p/tokenbucket": allowedOf(got["p/tokenbucket"]), "p/gcra": allowedOf(got["p/gcra"]),
		"p/slidingcounter": allowedOf(got["p/slidingcounter"]),
	})
}

func TestTopKeysNoneOrSome(t *testing.T) {
	recs := []accesslog.Record{at("a", 0), at("a", 1), at("b", 2), at("b", 3)}
	for top, want := range map[int]int{-1: 0, 0: 2, 1: 1} {
		rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}, Algorithms: []string{"tokenbucket"}, TopKeys: top}, recs...)
		require.Len(t, rep.Results[0].TopKeys, want, "TopKeys %d", top)
	}
}

func TestOwnAlgorithmFirstThenTheOthers(t *testing.T) {
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Algorithm: "slidinglog", Limit: sluice.PerSecond(3)}}}, at("a", 0))
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Algorithm)
		require.Equal(t, r.Algorithm == "slidinglog", r.Own)
	}
	require.Equal(t, []string{"slidinglog", "tokenbucket", "gcra", "fixedwindow", "slidingcounter"}, names)
	// The window algorithms read the policy's burst as its rate.
	rep, _ = decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerMinute(60).WithBurst(10)}}}, at("a", 0))
	for _, r := range rep.Results {
		want := int64(10)
		if r.Algorithm == "fixedwindow" || r.Algorithm == "slidingcounter" || r.Algorithm == "slidinglog" {
			want = 60
		}
		require.Equal(t, want, r.Limit.Burst, r.Algorithm)
	}
}

func TestAnAlternativeThatCannotTakeTheLimitIsLeftOut(t *testing.T) {
	// A sliding log allows at most 10,000 per period.
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(20000)}}}, at("a", 0))
	for _, r := range rep.Results {
		require.NotEqual(t, "slidinglog", r.Algorithm)
	}
	require.Len(t, rep.Results, 4)
	// Asked for by name, it is an error.
	_, err := Run(context.Background(), &records{}, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(20000)}}, Algorithms: []string{"slidinglog"}})
	require.ErrorContains(t, err, "slidinglog")
}

func TestConfigRefusals(t *testing.T) {
	ok := Policy{Name: "p", Limit: sluice.PerSecond(1)}
	many := make([]Policy, MaxPolicies+1)
	for i := range many {
		many[i] = Policy{Name: fmt.Sprint("p", i), Limit: sluice.PerSecond(1)}
	}
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"no policy":         {Config{}, "no policy"},
		"too many":          {Config{Policies: many}, "at most 64"},
		"target 1":          {Config{Policies: []Policy{ok}, Target: 1}, "target"},
		"negative target":   {Config{Policies: []Policy{ok}, Target: -0.1}, "target"},
		"unknown algorithm": {Config{Policies: []Policy{ok}, Algorithms: []string{"leaky"}}, `"leaky"`},
		"own unknown":       {Config{Policies: []Policy{{Name: "p", Algorithm: "leaky", Limit: sluice.PerSecond(1)}}}, `"leaky"`},
		"duplicate name":    {Config{Policies: []Policy{ok, ok}}, "taken"},
		"empty name":        {Config{Policies: []Policy{{Limit: sluice.PerSecond(1)}}}, "empty"},
		"invalid limit":     {Config{Policies: []Policy{{Name: "p", Limit: sluice.Limit{Rate: 0, Period: time.Second, Burst: 1}}}}, "tokenbucket"},
		"negative cost":     {Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1), Cost: -1}}}, "cost"},
		"bad route":         {Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1), Routes: []string{"GET"}}}}, "route"},
		"negative max keys": {Config{Policies: []Policy{ok}, MaxKeys: -1}, "negative"},
		"cost above burst":  {Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(5), Cost: 6}}}, "cost 6 exceeds 5, the most tokenbucket can ever allow at 5 per 1s, burst 5"},
		"route cost above":  {Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(5), Costs: []RouteCost{{Route: "POST /r", Cost: 9}}}}}, `route "POST /r": cost 9 exceeds 5`},
	} {
		t.Run(name, func(t *testing.T) {
			rep, err := Run(context.Background(), &records{}, c.cfg)
			require.ErrorContains(t, err, c.want)
			require.Nil(t, rep)
		})
	}
}

func TestRoutesMatchAsServeMuxPatterns(t *testing.T) {
	cfg := Config{Algorithms: []string{"fixedwindow"}, Policies: []Policy{
		{Name: "reports", Routes: []string{"POST /reports"}, Limit: sluice.PerSecond(100)},
		{Name: "items", Routes: []string{"GET /items/{id}"}, Limit: sluice.PerSecond(100)},
		{Name: "all", Limit: sluice.PerSecond(100)},
	}}
	rec := func(method, path, route string) accesslog.Record {
		r := at("a", 0)
		r.Method, r.Path, r.Route = method, path, route
		return r
	}
	rep, _ := decisions(t, cfg,
		rec("POST", "/reports", ""),
		rec("GET", "/reports", ""),     // a method the pattern does not have
		rec("GET", "/items/42", ""),    // a wildcard
		rec("HEAD", "/items/7", ""),    // GET patterns match HEAD, as in ServeMux
		rec("GET", "/items/7/x", ""),   // one segment only
		rec("", "", "POST /reports"),   // a logged route, matched as a pattern's text
		rec("", "", "GET /items/{id}"), // likewise
	)
	got := map[string]int64{}
	for _, r := range rep.Results {
		got[r.Policy] = r.Requests
	}
	require.Equal(t, map[string]int64{"reports": 2, "items": 3, "all": 7}, got)
	require.Zero(t, rep.Input.Unmatched)

	cfg.Policies = cfg.Policies[:2]
	rep, _ = decisions(t, cfg, rec("GET", "/other", ""), rec("POST", "/reports", ""))
	require.EqualValues(t, 1, rep.Input.Unmatched)
}

func TestTimeNeverGoesBack(t *testing.T) {
	// The third record was logged 500 ms before the second: decided at the
	// second's time, as a server clock never goes back.
	rep, got := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}, Algorithms: []string{"fixedwindow"}},
		at("a", 0), at("a", 1500), at("a", 1000))
	require.EqualValues(t, 1, rep.Input.OutOfOrder)
	require.Equal(t, "++-", allowedOf(got["p/fixedwindow"]))
	require.Equal(t, t0.Add(1500*time.Millisecond), got["p/fixedwindow"][2].Time)
}

func TestUnusableTimesAreSkippedWithTheirLine(t *testing.T) {
	before := accesslog.Record{Time: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), Key: "a", Line: 2}
	after := accesslog.Record{Time: time.Date(2100, 1, 2, 0, 0, 0, 0, time.UTC), Key: "a", Line: 3}
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}}, at("a", 0), before, after)
	require.EqualValues(t, 1, rep.Input.Records)
	require.EqualValues(t, 2, rep.Input.Skipped)
	require.Equal(t, []int64{2, 3}, []int64{rep.Input.SkippedLines[0].Line, rep.Input.SkippedLines[1].Line})
	require.Contains(t, rep.Input.SkippedLines[0].Reason, "outside 1970-2099")
}

func TestACostAboveCapacityIsDeniedAndMovesNothing(t *testing.T) {
	big := at("a", 0)
	big.Cost = 6
	rep, got := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(5)}}, Algorithms: []string{"tokenbucket"}},
		big, at("a", 1), at("a", 2), at("a", 3), at("a", 4), at("a", 5), at("a", 6))
	require.Equal(t, "-+++++-", allowedOf(got["p/tokenbucket"]))
	require.True(t, got["p/tokenbucket"][0].OverCapacity)
	require.EqualValues(t, 1, rep.Results[0].OverCapacity)
	require.EqualValues(t, 2, rep.Results[0].Denied)
}

func TestPolicyCostMultipliesTheRecordsCost(t *testing.T) {
	two := at("a", 0)
	two.Cost = 2
	_, got := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(10), Cost: 3}}, Algorithms: []string{"tokenbucket"}},
		two, at("a", 1), at("a", 2))
	ds := got["p/tokenbucket"]
	require.Equal(t, []int64{6, 3, 3}, []int64{ds[0].Cost, ds[1].Cost, ds[2].Cost})
	require.Equal(t, "++-", allowedOf(ds)) // 6 + 3 fit in 10, 3 more do not
}

func TestWellBehavedKeys(t *testing.T) {
	// 5 per minute, burst 5. "bursty" sends 8 at once, then one more ten
	// minutes later: 9 in its ten minutes, 0.9 a minute on average, well
	// within the rate, yet 3 are denied. "greedy" sends one a second for a
	// minute: 5 pass, then one every 12 s (at 12, 24, 36 and 48 s); 51
	// are denied, and its 60 in one minute are over the rate.
	recs := []accesslog.Record{}
	for i := range 8 {
		recs = append(recs, at("bursty", i))
	}
	for i := range 60 {
		recs = append(recs, at("greedy", 10+i*1000))
	}
	recs = append(recs, at("bursty", 10*60*1000), at("other", 10*60*1000))
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerMinute(5)}}, Algorithms: []string{"tokenbucket"}}, recs...)
	r := rep.Results[0]
	require.EqualValues(t, 3, r.Keys)
	require.EqualValues(t, 2, r.DeniedKeys)
	require.EqualValues(t, 1, r.WellBehavedKeys)
	require.EqualValues(t, 3, r.WellBehavedDenials)
	require.Equal(t, []KeyStat{
		{Key: "greedy", Requests: 60, Cost: 60, Denied: 51, WellBehaved: false},
		{Key: "bursty", Requests: 9, Cost: 9, Denied: 3, WellBehaved: true},
	}, r.TopKeys)

	// The average is over the key's own span, at least a period: the
	// same 8 at once with no later request is 8 in a minute, over the
	// rate, though the log lasts ten minutes.
	recs = append(recs[:68], at("other", 10*60*1000))
	rep, _ = decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerMinute(5)}}, Algorithms: []string{"tokenbucket"}}, recs...)
	require.Zero(t, rep.Results[0].WellBehavedKeys)
}

func TestWorstWindow(t *testing.T) {
	// A token bucket of 10 per second, burst 10: a full bucket at 0, then
	// one token every 100 ms, taken as it comes: 10 + 9 in [0, 1 s).
	var recs []accesslog.Record
	for i := range 10 {
		recs = append(recs, at("a", i))
	}
	for i := 1; i <= 9; i++ {
		recs = append(recs, at("a", 10+i*100))
	}
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(10)}}, Algorithms: []string{"tokenbucket", "slidinglog"}}, recs...)
	require.Equal(t, Worst{Key: "a", Start: t0, Admitted: 19, Rate: 10}, rep.Results[0].Worst)
	require.Equal(t, Worst{Key: "a", Start: t0, Admitted: 10, Rate: 10}, rep.Results[1].Worst)
}

func TestTimelineStaysWithinItsPoints(t *testing.T) {
	// One request a minute for a week: the step doubles from 1 s until
	// the week fits in maxTimelinePoints steps.
	var recs []accesslog.Record
	for i := range 7 * 24 * 60 {
		recs = append(recs, at(fmt.Sprint("k", i%7), i*60*1000))
	}
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerMinute(5)}}, Algorithms: []string{"fixedwindow"}}, recs...)
	tl := rep.Results[0].Timeline
	require.LessOrEqual(t, len(tl.Allowed), maxTimelinePoints)
	require.Equal(t, t0, tl.Start)
	require.Equal(t, time.Duration(1<<11)*time.Second, tl.Step) // 2048 s: 7 days / 2048 s = 295.3 steps
	var sum int64
	for i := range tl.Allowed {
		sum += tl.Allowed[i] + tl.Denied[i]
	}
	require.EqualValues(t, len(recs), sum)
}

func TestTargetFindsTheSmallestLimit(t *testing.T) {
	// 100 keys; key i sends i+1 requests at once. A burst of b denies the
	// keys that sent more than b: at most 10% of keys denied needs b >= 90.
	var recs []accesslog.Record
	for i := range 100 {
		for range i + 1 {
			recs = append(recs, at(fmt.Sprint("k", i), i))
		}
	}
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerHour(100)}}, Algorithms: []string{"tokenbucket"}, Target: 0.10}, recs...)
	fit := rep.Results[0].Target
	require.NotNil(t, fit)
	require.NotNil(t, fit.Limit)
	// The ladder's steps near 90: 100 x 2^(-1/4) = 84, which denies the
	// 16 keys that sent 85 to 100, then 100, which denies none.
	require.Equal(t, Limit{Rate: 100, Period: "1h0m0s", Burst: 100}, *fit.Limit)
	require.Zero(t, fit.DeniedKeyShare)
	var below LadderStep
	for _, s := range fit.Ladder {
		if s.Limit.Rate == 84 {
			below = s
		}
	}
	require.EqualValues(t, 16, below.DeniedKeys)
	require.EqualValues(t, 16*17/2, below.Denied)
	require.Len(t, fit.Ladder, ladderHigh-ladderLow+1)
}

func TestMemoryIsBoundedByActiveKeys(t *testing.T) {
	// 200,000 keys, each seen once, 5 ms apart, under 1 per second: about
	// 200 keys are active within any period. The limiter state expires
	// and is swept; the report's table forgets idle keys never denied
	// past MaxKeys. Every key is still counted.
	const n = 200_000
	recs := make([]accesslog.Record, n)
	for i := range recs {
		recs[i] = at(fmt.Sprint("k", i), i*5)
	}
	// One key denied early is kept to the end.
	recs[1] = at("k0", 1)
	rep, err := Run(context.Background(), &records{recs: recs}, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}, MaxKeys: 1000})
	require.NoError(t, err)
	for _, r := range rep.Results {
		require.True(t, r.Estimated, r.Algorithm)
		require.InEpsilon(t, n-1, r.Keys, 0.03, r.Algorithm) // about 4 standard errors
		require.EqualValues(t, 1, r.DeniedKeys, r.Algorithm)
		require.Equal(t, "k0", r.TopKeys[0].Key, r.Algorithm)
		require.Greater(t, r.DroppedKeys, int64(n-5000), r.Algorithm)
		require.LessOrEqual(t, r.PeakKeys, int64(2000), r.Algorithm)
		require.LessOrEqual(t, r.PeakStateKeys, int64(2*minSweepWrites+400), r.Algorithm)
	}
}

func TestDeniedKeysAreCountedWhenForgotten(t *testing.T) {
	// 50,000 keys, each sending two requests at once (the second denied
	// under 1 per second), 5 ms apart: every key is denied once, and the
	// table forgets them as they go idle. Keys and denied keys are then
	// estimates (within 3%, about 4 standard errors); the denials, the
	// well-behaved figures and the top keys stay exact.
	const n = 50_000
	recs := make([]accesslog.Record, 0, 2*n)
	for i := range n {
		k := fmt.Sprint("k", i)
		recs = append(recs, at(k, i*5), at(k, i*5))
	}
	for _, target := range []float64{0, 0.5} {
		rep, err := Run(context.Background(), &records{recs: recs},
			Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}, Algorithms: []string{"tokenbucket"}, MaxKeys: 1000, Target: target})
		require.NoError(t, err)
		r := rep.Results[0]
		require.True(t, r.Estimated)
		require.InEpsilon(t, n, r.Keys, 0.03)
		require.InEpsilon(t, n, r.DeniedKeys, 0.03)
		require.EqualValues(t, n, r.Denied)
		require.EqualValues(t, 0, r.WellBehavedKeys) // 2 in a second, over 1 per second
		require.Greater(t, r.DroppedKeys, int64(n-2000))
		require.LessOrEqual(t, r.PeakKeys, int64(2000))
		require.Len(t, r.TopKeys, defaultTopKeys)
		require.Equal(t, "k0", r.TopKeys[0].Key) // one denial each: by key
		if target > 0 {
			// At 2 per second and more no key is denied; below, every key.
			for _, s := range r.Target.Ladder {
				if s.Limit.Burst >= 2 {
					require.Zero(t, s.DeniedKeys, "%+v", s.Limit)
				} else {
					require.InEpsilon(t, n, s.DeniedKeys, 0.03, "%+v", s.Limit)
				}
			}
		}
	}
}

// blocking is a Source whose Next blocks until release is closed, as a
// terminal on standard input does.
type blocking struct{ release chan struct{} }

func (b blocking) Next() (accesslog.Record, bool) { <-b.release; return accesslog.Record{}, false }
func (b blocking) Err() error                     { return nil }

func TestRunReturnsWhenCancelledWhileTheLogBlocks(t *testing.T) {
	src := blocking{release: make(chan struct{})}
	defer close(src.release)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, src, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}})
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

func TestKeysSeenAgainAfterBeingForgottenCountOnce(t *testing.T) {
	// 5,000 keys, each seen once an hour for ten hours, the table holding
	// 1,000: each is forgotten between its visits. The table's own count
	// would say 50,000 keys; the estimate says about 5,000.
	const keys, rounds = 5000, 10
	var recs []accesslog.Record
	for r := range rounds {
		for i := range keys {
			recs = append(recs, at(fmt.Sprint("k", i), r*3600*1000+i))
		}
	}
	rep, err := Run(context.Background(), &records{recs: recs},
		Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}, Algorithms: []string{"fixedwindow"}, MaxKeys: 1000})
	require.NoError(t, err)
	r := rep.Results[0]
	require.True(t, r.Estimated)
	require.Greater(t, r.DroppedKeys, int64(keys))
	require.InEpsilon(t, keys, r.Keys, 0.03)
	require.Zero(t, r.DeniedKeys)
}

func TestKeysAreExactWhenNothingIsForgotten(t *testing.T) {
	var recs []accesslog.Record
	for i := range 3000 {
		recs = append(recs, at(fmt.Sprint("k", i), i), at(fmt.Sprint("k", i), i))
	}
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}, Algorithms: []string{"fixedwindow"}}, recs...)
	r := rep.Results[0]
	require.False(t, r.Estimated)
	require.EqualValues(t, 3000, r.Keys)
	require.EqualValues(t, 3000, r.DeniedKeys)
}

func TestDistinctEstimate(t *testing.T) {
	for _, n := range []int{0, 1, 100, 10_000, 1_000_000} {
		var d distinct
		for i := range n {
			d.add(fmt.Sprint("key-", i))
			d.add(fmt.Sprint("key-", i)) // twice: counted once
		}
		if n == 0 {
			require.Zero(t, d.estimate())
			continue
		}
		require.InEpsilon(t, n, d.estimate(), 0.03, "n=%d", n)
	}
}
