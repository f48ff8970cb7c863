package harness

import (
	"fmt"
	"slices"
)

// mergeRounds combines one subject's results of the rounds of one
// scenario into one: counts add up; decisions per second are all the
// decisions over all the rounds' time; Redis calls and server time per
// decision are weighted by each round's decisions; latency percentiles
// are the rounds' medians (percentiles do not add up); the worst window
// is the worst round's; the first round's error, if any, is the result's.
// Rounds keeps each round's own figures, for ranges (HeadlineOf).
func mergeRounds(rs []Result) Result {
	if len(rs) == 1 {
		return rs[0]
	}
	out := rs[0]
	out.Requests, out.Admitted, out.Ideal, out.Degraded = 0, 0, 0, 0
	out.Error = ""
	out.AdmittedOverTime = make([]int64, len(rs[0].AdmittedOverTime))
	out.IdealOverTime = make([]int64, len(rs[0].IdealOverTime))
	var seconds, calls, usec float64
	measured := true
	var p50, p99, p999 []float64
	for i, r := range rs {
		out.Rounds = append(out.Rounds, Round{DecisionsPerSecond: r.DecisionsPerSecond, ServerMicrosPerDecision: r.ServerMicrosPerDecision, Error: r.Error})
		if r.Error != "" && out.Error == "" {
			out.Error = fmt.Sprintf("round %d of %d: %s", i+1, len(rs), r.Error)
		}
		out.Requests += r.Requests
		out.Admitted += r.Admitted
		out.Ideal += r.Ideal
		out.Degraded += r.Degraded
		out.WorstWindow = max(out.WorstWindow, r.WorstWindow)
		if r.DecisionsPerSecond > 0 {
			seconds += float64(r.Requests) / r.DecisionsPerSecond
		}
		if r.RedisCallsPerDecision < 0 || r.ServerMicrosPerDecision < 0 {
			measured = false
		}
		calls += r.RedisCallsPerDecision * float64(r.Requests)
		usec += r.ServerMicrosPerDecision * float64(r.Requests)
		p50, p99, p999 = append(p50, r.LatencyMicros.P50), append(p99, r.LatencyMicros.P99), append(p999, r.LatencyMicros.P999)
		for j := range out.AdmittedOverTime {
			if j < len(r.AdmittedOverTime) {
				out.AdmittedOverTime[j] += r.AdmittedOverTime[j]
			}
		}
		for j := range out.IdealOverTime {
			if j < len(r.IdealOverTime) {
				out.IdealOverTime[j] += r.IdealOverTime[j]
			}
		}
	}
	out.DecisionsPerSecond = 0
	if seconds > 0 {
		out.DecisionsPerSecond = float64(out.Requests) / seconds
	}
	out.RedisCallsPerDecision, out.ServerMicrosPerDecision = -1, -1
	if measured && out.Requests > 0 {
		out.RedisCallsPerDecision = calls / float64(out.Requests)
		out.ServerMicrosPerDecision = usec / float64(out.Requests)
	}
	out.LatencyMicros = Latency{P50: median(p50), P99: median(p99), P999: median(p999)}
	out.PingLatencyMicros = nil
	var pings [3][]float64
	for _, r := range rs {
		if r.PingLatencyMicros == nil {
			pings = [3][]float64{}
			break
		}
		pings[0] = append(pings[0], r.PingLatencyMicros.P50)
		pings[1] = append(pings[1], r.PingLatencyMicros.P99)
		pings[2] = append(pings[2], r.PingLatencyMicros.P999)
	}
	if len(pings[0]) == len(rs) {
		out.PingLatencyMicros = &Latency{P50: median(pings[0]), P99: median(pings[1]), P999: median(pings[2])}
	}
	return out
}

// median of vs (the mean of the middle two for an even count); 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
