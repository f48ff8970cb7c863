package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEverySluiceSubjectBuildsForEveryScenario: each of Sluice's subjects
// builds for the limit of every scenario it runs in, on the embedded
// store, but the sliding log above its documented rate (one entry per
// admitted request: at most 10,000 per period). A full run once reported
// the window algorithms failed in every throughput scenario, since their
// stack refused the scenario's burst.
func TestEverySluiceSubjectBuildsForEveryScenario(t *testing.T) {
	c := Clients{GoRedis: embeddedClient(t)}
	for _, sc := range Scenarios() {
		subjects := sc.Subjects
		if subjects == nil {
			subjects = Subjects()
		}
		for _, s := range subjects {
			if !strings.HasPrefix(s.Name, "sluice/") {
				continue
			}
			_, closeSubject, err := s.New(c, sc.Limit)
			if strings.HasPrefix(s.Name, "sluice/slidinglog") && sc.Limit.Rate > 10_000 {
				require.ErrorContains(t, err, "rate must be at most 10000", "%s in %q", s.Name, sc.Name)
				continue
			}
			require.NoError(t, err, "%s in %q (limit %+v)", s.Name, sc.Name, sc.Limit)
			closeSubject()
		}
	}
}
