package lease_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/lease"
)

// TestNoProcessIsStarvedBelowHalfTheLimit holds the first-lease rule: a
// lease takes at most a quarter of what the bucket has left after the
// request's cost, so the processes sharing a tenant's key, 2 to 10 of them
// in any order, are never denied before the tenant has spent half its
// burst. The bucket does not refill during the test (Rate per hour, on
// synctest's clock), and no process ever admits more than the burst in
// all. Each case logs when its first denial came:
//
//	go test -v -run TestNoProcessIsStarvedBelowHalfTheLimit ./lease/ | grep 'first denial' | sort -t'(' -k2 -n | head -1
func TestNoProcessIsStarvedBelowHalfTheLimit(t *testing.T) {
	algorithms := map[string]func(sluice.Store) (ext.Leaser, error){
		"tokenbucket": func(s sluice.Store) (ext.Leaser, error) { return tokenbucket.New(s) },
		"gcra":        func(s sluice.Store) (ext.Leaser, error) { return gcra.New(s) },
	}
	for name, newAlg := range algorithms {
		for _, processes := range []int{2, 3, 5, 10} {
			for _, burst := range []int64{2, 3, 5, 10, 30, 100, 1000} {
				for _, order := range []string{"round-robin", "random"} {
					t.Run(fmt.Sprintf("%s/%d-processes/burst-%d/%s", name, processes, burst, order), func(t *testing.T) {
						synctest.Test(t, func(t *testing.T) {
							alg, err := newAlg(newMemStore(t))
							require.NoError(t, err)
							limiters := make([]*lease.Limiter, processes)
							for i := range limiters {
								limiters[i], err = lease.New(alg.(sluice.Limiter))
								require.NoError(t, err)
								defer limiters[i].Close()
							}
							limit := sluice.Limit{Rate: burst, Period: time.Hour, Burst: burst}
							rng := rand.New(rand.NewPCG(uint64(processes), uint64(burst)))
							var admitted int64
							firstDenial := int64(-1) // admitted before the first denial
							for call := range 3 * burst {
								p := int(call) % processes
								if order == "random" {
									p = rng.IntN(processes)
								}
								d, err := limiters[p].AllowN(t.Context(), "tenant", limit, 1)
								require.NoError(t, err)
								if !d.Allowed {
									if firstDenial < 0 {
										firstDenial = admitted
									}
									require.GreaterOrEqual(t, 2*admitted, burst,
										"process %d was denied on call %d when the tenant had spent %d of %d", p, call+1, admitted, burst)
									continue
								}
								admitted++
							}
							require.LessOrEqual(t, admitted, burst, "the processes together admit at most the burst")
							if firstDenial >= 0 {
								t.Logf("first denial after %d of %d (%d %%)", firstDenial, burst, 100*firstDenial/burst)
							}
						})
					})
				}
			}
		}
	}
}
