package batching_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/batching"
)

var errBad = errors.New("bad request")

// fake decides every request allowed with Remaining = N. Keys starting
// with "bad" are refused as a RequestError; as a Cluster it refuses
// batches whose keys' tags differ; failWith fails every batch.
type fake struct {
	mu       sync.Mutex // the groups of a Decide may come at once
	cluster  bool
	failWith error
	short    bool // answer one result too few
	batches  [][]string
	singles  []string
}

func (f *fake) AllowN(_ context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.singles = append(f.singles, key)
	return sluice.Decision{Allowed: true, Limit: limit, Remaining: n}, nil
}

func (f *fake) AllowBatch(_ context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for i, r := range reqs {
		if strings.HasPrefix(r.Key, "bad") {
			return nil, &sluice.RequestError{Index: i, Err: errBad}
		}
		keys = append(keys, r.Key)
	}
	if f.cluster {
		for _, k := range keys {
			if ext.HashTag(k) != ext.HashTag(keys[0]) || ext.HashTag(k) == "" {
				return nil, sluice.ErrCrossSlot
			}
		}
	}
	f.batches = append(f.batches, keys)
	if f.failWith != nil {
		return nil, f.failWith
	}
	out := make([]sluice.Result, len(reqs))
	for i, r := range reqs {
		out[i].Decision = sluice.Decision{Allowed: true, Limit: r.Limit, Remaining: r.N}
	}
	if f.short {
		out = out[1:]
	}
	return out, nil
}

func requests(keys ...string) []sluice.Request {
	reqs := make([]sluice.Request, len(keys))
	for i, k := range keys {
		reqs[i] = sluice.Request{Key: k, Limit: sluice.PerSecond(100), N: int64(i + 1)}
	}
	return reqs
}

// decide runs one Decide and returns its results.
func decide(s *batching.Sender, reqs []sluice.Request) []sluice.Result {
	results := make([]sluice.Result, len(reqs))
	s.Decide(context.Background(), reqs, results)
	return results
}

// requireDecided checks that results[i] is request i's own decision.
func requireDecided(t *testing.T, reqs []sluice.Request, results []sluice.Result, except ...int) {
	t.Helper()
	for i, r := range results {
		if slices.Contains(except, i) {
			continue
		}
		require.NoError(t, r.Err, "request %d", i)
		require.Equal(t, reqs[i].N, r.Decision.Remaining, "request %d has its own answer", i)
	}
}

func TestOneBatch(t *testing.T) {
	f := &fake{}
	s := newSender(f, false)
	reqs := requests("a", "b", "c")
	requireDecided(t, reqs, decide(s, reqs))
	require.Equal(t, [][]string{{"a", "b", "c"}}, f.batches)
	batches, requests := s.Counts()
	require.Equal(t, [2]int64{1, 3}, [2]int64{batches, requests})
}

func TestARequestAloneGoesByAllowN(t *testing.T) {
	f := &fake{}
	reqs := requests("a")
	requireDecided(t, reqs, decide(newSender(f, false), reqs))
	require.Equal(t, []string{"a"}, f.singles)
	require.Empty(t, f.batches)
}

func TestAnInvalidRequestFailsAlone(t *testing.T) {
	f := &fake{}
	reqs := requests("a", "bad", "c", "bad2", "e")
	results := decide(newSender(f, false), reqs)
	require.ErrorIs(t, results[1].Err, errBad)
	require.ErrorIs(t, results[3].Err, errBad)
	requireDecided(t, reqs, results, 1, 3)
	require.Equal(t, [][]string{{"a", "c", "e"}}, f.batches, "the rest go together, in order")
}

func TestACrossSlotBatchIsSplitByTag(t *testing.T) {
	f := &fake{cluster: true}
	s := newSender(f, false)
	reqs := requests("{x}1", "{y}1", "{x}2", "untagged", "{y}2")
	requireDecided(t, reqs, decide(s, reqs))
	require.ElementsMatch(t, [][]string{{"{x}1", "{x}2"}, {"{y}1", "{y}2"}}, f.batches, "each tag's keys together, in order")
	require.Equal(t, []string{"untagged"}, f.singles, "a key without a tag goes alone")
	require.True(t, s.ByTag(), "and batches are grouped by tag from now on")

	f.batches = nil
	reqs = requests("{z}1", "{w}1", "{z}2")
	requireDecided(t, reqs, decide(s, reqs))
	require.Equal(t, [][]string{{"{z}1", "{z}2"}}, f.batches, "no batch is refused any more")
	batches, requests := s.Counts()
	require.Equal(t, [2]int64{3, 6}, [2]int64{batches, requests}, "refused batches are not counted")
}

func TestAFailedBatchFailsEveryRequest(t *testing.T) {
	boom := errors.New("connection reset")
	reqs := requests("a", "b", "c")
	for _, r := range decide(newSender(&fake{failWith: boom}, false), reqs) {
		require.ErrorIs(t, r.Err, boom)
	}
	for _, r := range decide(newSender(&fake{short: true}, false), reqs) {
		require.ErrorIs(t, r.Err, sluice.ErrUnexpectedReply)
	}
}

func TestHashTag(t *testing.T) {
	for key, tag := range map[string]string{
		"{t}:tb": "t", "a{b}c{d}": "b", "{}x": "", "x{": "", "x}{y}": "y", "plain": "", "{{a}}": "{a",
	} {
		require.Equal(t, tag, ext.HashTag(key), key)
		if tag != "" {
			require.Equal(t, ext.HashSlot(key), ext.HashSlot("{"+tag+"}"), "the slot is the tag's: %s", key)
		}
	}
}

// panicky panics on the batches that hold key "{b}boom" (with a string)
// or "{c}bang" (with an error).
type panicky struct{ fake }

func (p *panicky) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	for _, r := range reqs {
		switch r.Key {
		case "{b}boom":
			panic("boom")
		case "{c}bang":
			panic(errors.New("bang"))
		}
	}
	return p.fake.AllowBatch(ctx, reqs)
}

func TestAPanicInAGroupReachesTheCaller(t *testing.T) {
	s := newSender(&panicky{}, true)
	reqs := requests("{a}1", "{a}2", "{b}boom", "{b}2")
	require.PanicsWithValue(t, "boom", func() { decide(s, reqs) })
	reqs = requests("{a}1", "{a}2", "{b}boom", "{b}2", "{c}bang", "{c}2")
	require.Panics(t, func() { decide(s, reqs) }, "two groups panicking with values of different types")
}

// gathering counts the calls in flight at once; each call waits (up to
// 200 ms) until want calls are in flight together.
type gathering struct {
	fake
	want           int32
	inFlight, most atomic.Int32
	allThere       chan struct{}
	allThereOnce   sync.Once
}

func (g *gathering) wait() {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	if n == g.want {
		g.allThereOnce.Do(func() { close(g.allThere) })
	}
	select {
	case <-g.allThere:
	case <-time.After(200 * time.Millisecond):
	}
}

func (g *gathering) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	g.wait()
	return g.fake.AllowN(ctx, key, limit, n)
}

func (g *gathering) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	g.wait()
	return g.fake.AllowBatch(ctx, reqs)
}

func TestGroupsGoAtTheSameTime(t *testing.T) {
	g := &gathering{fake: fake{cluster: true}, want: 4, allThere: make(chan struct{})}
	reqs := requests("{a}1", "{b}1", "{c}1", "{d}1", "{a}2", "{b}2", "{c}2", "{d}2")
	requireDecided(t, reqs, decide(newSender(g, true), reqs))
	require.Equal(t, int32(4), g.most.Load(), "the 4 tags' batches were in flight together")
}

// newSender is a Sender to l, which batches itself.
func newSender[L interface {
	sluice.Limiter
	sluice.BatchLimiter
}](l L, byTag bool) *batching.Sender {
	return batching.NewSender(l, l, byTag)
}

// leaseFake records which of Lease, Release and LeaseBatch each request
// reached.
type leaseFake struct {
	mu                      sync.Mutex
	leases, releases, batch []string
}

func (f *leaseFake) Lease(_ context.Context, r ext.LeaseRequest) (ext.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, r.Key)
	return ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: r.Limit}, Extra: r.Extra}, nil
}

func (f *leaseFake) Release(_ context.Context, key string, limit sluice.Limit, _, unspent int64) (sluice.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases = append(f.releases, key)
	return sluice.Decision{Allowed: true, Limit: limit, Remaining: unspent}, nil
}

func (f *leaseFake) LeaseBatch(_ context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ext.LeaseResult, len(reqs))
	for i, r := range reqs {
		f.batch = append(f.batch, r.Key)
		out[i].Decision = sluice.Decision{Allowed: true, Limit: r.Limit, Remaining: r.Unspent}
	}
	return out, nil
}

// TestAReleaseAloneGoesByRelease: a lease request sent alone goes to
// Lease, a release alone to Release (its Decision as the Grant), and
// several go as one LeaseBatch.
func TestAReleaseAloneGoesByRelease(t *testing.T) {
	f := &leaseFake{}
	s := batching.NewLeaseSender(f, f, true) // by tag: keys without one go alone
	limit := sluice.PerSecond(100)
	reqs := []ext.LeaseRequest{
		{Key: "take", Limit: limit, Holder: 1, Cost: 1, Extra: 3, Hold: time.Second},
		{Key: "release", Limit: limit, Holder: 1, Release: true, Unspent: 7},
		{Key: "{t}a", Limit: limit, Holder: 1, Release: true, Unspent: 2},
		{Key: "{t}b", Limit: limit, Holder: 1, Cost: 1, Hold: time.Second},
	}
	results := make([]ext.LeaseResult, len(reqs))
	s.Decide(context.Background(), reqs, results)
	require.Equal(t, []string{"take"}, f.leases)
	require.Equal(t, []string{"release"}, f.releases)
	require.Equal(t, []string{"{t}a", "{t}b"}, f.batch)
	require.Equal(t, ext.LeaseResult{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 7}}}, results[1])
	require.EqualValues(t, 3, results[0].Extra)
	require.EqualValues(t, 2, results[2].Remaining)
}
