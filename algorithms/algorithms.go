// Package algorithms builds any of Sluice's five algorithms by name, for
// configuration files (httplimit.Load, sluice serve): "tokenbucket" (also
// ""), "gcra", "fixedwindow", "slidingcounter" and "slidinglog". Code that
// knows its algorithm imports its package directly.
package algorithms

import (
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
)

// Names are the algorithms New knows, the default first.
var Names = []string{"tokenbucket", "gcra", "fixedwindow", "slidingcounter", "slidinglog"}

// New returns the algorithm called name on store, with its defaults; an
// empty name is the token bucket. An unknown name is an error listing the
// known ones.
func New(name string, store sluice.Store) (sluice.Limiter, error) {
	switch name {
	case "", "tokenbucket":
		return tokenbucket.New(store)
	case "gcra":
		return gcra.New(store)
	case "fixedwindow":
		return fixedwindow.New(store)
	case "slidingcounter":
		return slidingcounter.New(store)
	case "slidinglog":
		return slidinglog.New(store)
	}
	return nil, fmt.Errorf("algorithm: unknown %q (tokenbucket, gcra, fixedwindow, slidingcounter or slidinglog)", name)
}
