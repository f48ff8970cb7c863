package ext_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestCheckLeaseValidatesAReleaseAsReleaseDoes: a release request needs a
// key, a valid limit, a holder and 0 <= Unspent <= MaxBurst, and nothing
// of a take's fields; a take is checked as before.
func TestCheckLeaseValidatesAReleaseAsReleaseDoes(t *testing.T) {
	l := sluicetest.AllowOnly{}
	limit := sluice.PerSecond(10)
	release := ext.LeaseRequest{Key: "k", Limit: limit, Holder: 1, Release: true, Unspent: sluice.MaxBurst,
		Cost: -1, Extra: -1, Held: -1, Hold: -1} // unused by a release
	require.NoError(t, ext.CheckLease(l, release))
	for name, c := range map[string]struct {
		mutate func(*ext.LeaseRequest)
		want   error
	}{
		"no key":           {func(r *ext.LeaseRequest) { r.Key = "" }, sluice.ErrInvalidKey},
		"no limit":         {func(r *ext.LeaseRequest) { r.Limit = sluice.Limit{} }, sluice.ErrInvalidLimit},
		"no holder":        {func(r *ext.LeaseRequest) { r.Holder = 0 }, sluice.ErrInvalidCost},
		"negative unspent": {func(r *ext.LeaseRequest) { r.Unspent = -1 }, sluice.ErrInvalidCost},
		"huge unspent":     {func(r *ext.LeaseRequest) { r.Unspent = sluice.MaxBurst + 1 }, sluice.ErrInvalidCost},
	} {
		r := release
		c.mutate(&r)
		require.ErrorIs(t, ext.CheckLease(l, r), c.want, name)
	}

	take := ext.LeaseRequest{Key: "k", Limit: limit, Holder: 1, Cost: 1, Extra: 5, Hold: time.Second, Unspent: -1} // Unspent unused
	require.NoError(t, ext.CheckLease(l, take))
	take.Cost = limit.Burst + 1
	require.ErrorIs(t, ext.CheckLease(l, take), sluice.ErrCostExceedsBurst)
	take.Cost, take.Hold = 1, 0
	require.ErrorIs(t, ext.CheckLease(l, take), sluice.ErrInvalidLimit)
}
