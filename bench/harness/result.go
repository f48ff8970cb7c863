// Package harness runs Sluice's comparative benchmark: scenarios (steady
// load, a burst after idle, the fixed-window boundary attack, a hot
// tenant, ...) against subjects (each Sluice algorithm and decorator
// stack, other Go rate limiters on the same Redis, and an in-process
// golang.org/x/time/rate as the no-network ceiling), and reports what each
// admitted against the ideal, how fast, and at what cost to Redis. The
// serve scenarios measure sluice serve over gRPC against a direct library
// call, and envoyproxy/ratelimit itself against sluice-serve in its
// envoyproxy/ratelimit-compatible mode, two processes on the same
// redis-server (serve.go, envoyproxy.go).
package harness

import "time"

// Report is a whole run: where it ran and every result.
type Report struct {
	Started time.Time `json:"started"`
	// Redis says what the subjects ran on: "embedded (miniredis)" or the
	// real server's address and version.
	Redis string `json:"redis"`
	// Representative is false on the embedded default: its latencies say
	// little about a real Redis.
	Representative bool   `json:"representative"`
	Machine        string `json:"machine"`
	// Ceilings are reference throughputs outside the scenarios, such as
	// redis-benchmark -P 16 running the token bucket's own script.
	Ceilings []Ceiling `json:"ceilings,omitempty"`
	Results  []Result  `json:"results"`
	// Headline is the comparison the README quotes (HeadlineOf).
	Headline []Headline `json:"headline,omitempty"`
	// Full says the run was sluice bench --full (every scenario and
	// subject); otherwise the quick set or a selection.
	Full bool `json:"full"`
	// Rounds is how many rounds each throughput scenario ran in
	// (Options.Rounds).
	Rounds int `json:"rounds,omitempty"`
}

// Ceiling is one reference throughput and how it was measured.
type Ceiling struct {
	Name           string  `json:"name"`
	Command        string  `json:"command"`
	RequestsPerSec float64 `json:"requests_per_second"`
}

// Result is one subject in one scenario.
type Result struct {
	Scenario string `json:"scenario"`
	Subject  string `json:"subject"`
	Limit    string `json:"limit"`

	Requests int64 `json:"requests"`
	Admitted int64 `json:"admitted"`
	// Ideal is what a perfect limiter would have admitted.
	Ideal int64 `json:"ideal"`
	// WorstWindow is the most admitted in any interval of one Period, as
	// a multiple of Rate.
	WorstWindow float64 `json:"worst_window"`

	DecisionsPerSecond float64 `json:"decisions_per_second"`
	LatencyMicros      Latency `json:"latency_us"`
	// PingLatencyMicros is the same client's PING, sent before each
	// decision and timed apart, in scenarios that interleave it (the
	// latency scenario); nil elsewhere and for in-process subjects.
	PingLatencyMicros *Latency `json:"ping_latency_us,omitempty"`

	// RedisCallsPerDecision and ServerMicrosPerDecision come from INFO
	// commandstats; negative when not measured (in-process subjects,
	// the embedded store).
	RedisCallsPerDecision   float64 `json:"redis_calls_per_decision"`
	ServerMicrosPerDecision float64 `json:"server_us_per_decision"`
	// MemoryPerKey is INFO memory's used_memory growth per key over the
	// keys the scenario created (measured in the memory scenario only).
	MemoryPerKey float64 `json:"memory_bytes_per_key,omitempty"`

	// AdmittedOverTime is the cumulative number admitted at the end of
	// each tenth of the run, with the ideal's, for the report's charts.
	AdmittedOverTime []int64 `json:"admitted_over_time"`
	IdealOverTime    []int64 `json:"ideal_over_time"`

	// Overhead is what this subject costs over another of the same
	// scenario (the serve scenarios: a server over a direct call); nil
	// where the subject names none.
	Overhead *Overhead `json:"overhead,omitempty"`

	// Rounds are the figures of each round, when the scenario ran in
	// several (Options.Rounds); the figures above are then the rounds'
	// together (mergeRounds).
	Rounds []Round `json:"rounds,omitempty"`

	// Degraded counts the decisions a fallback policy made instead of
	// Redis (sluice.Decision.Degraded); a run with any is marked with an
	// Error, since its figures are then not Redis's.
	Degraded int64 `json:"degraded,omitempty"`

	Error string `json:"error,omitempty"`
}

// Overhead is one subject's cost over another's in the same scenario.
type Overhead struct {
	// Over is the other subject.
	Over string `json:"over"`
	// P50Micros is the p50 latency minus the other's, in microseconds.
	P50Micros float64 `json:"p50_us"`
	// MicrosPerDecision is 1 / decisions per second minus the other's, in
	// microseconds: with one caller, about the mean added latency; with
	// many, the added cost per decision to the machine under load.
	MicrosPerDecision float64 `json:"us_per_decision"`
}

// Latency holds percentiles of one decision's latency, in microseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// Round is one round's figures of a subject in a scenario run in rounds.
type Round struct {
	DecisionsPerSecond      float64 `json:"decisions_per_second"`
	ServerMicrosPerDecision float64 `json:"server_us_per_decision"`
	Error                   string  `json:"error,omitempty"`
}
