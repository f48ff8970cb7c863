package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/memstore"
)

// Bounds on the demo's flags. They keep a run short (every request is one
// script call) and the simulated clock well inside the range the scripts
// accept.
const (
	maxDemoPods      = 10_000      // largest pod count
	maxDemoPodCounts = 16          // most pod counts in --pods
	maxDemoRate      = 1_000_000.0 // largest --rate, requests per second
	maxDemoRequests  = 1_000_000   // most requests per run (--rate × --duration)
	maxDemoDuration  = 366 * 24 * time.Hour
	redisTimeout     = 5 * time.Second // for the connection check and the cleanup
)

// demoConfig is what the demo simulates. parseDemoFlags fills it from the
// command line; runDemo validates it.
type demoConfig struct {
	LimitPerMinute int64         // requests allowed per minute, also the burst
	RatePerSecond  float64       // requests per second the client sends
	Duration       time.Duration // simulated time each run lasts
	Pods           []int         // pod counts to compare, one column each
	RedisURL       string        // Redis for the shared bucket; empty: the embedded store
}

func defaultDemoConfig() demoConfig {
	return demoConfig{
		LimitPerMinute: 60,
		RatePerSecond:  20,
		Duration:       3 * time.Minute,
		Pods:           []int{2, 4, 10},
	}
}

// limit is the limit every run enforces.
func (c demoConfig) limit() sluice.Limit { return sluice.PerMinute(c.LimitPerMinute) }

// requestAt returns the simulated time of the client's i-th request (from 0),
// counted from the start of the run.
func (c demoConfig) requestAt(i int64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / c.RatePerSecond)
}

// requests returns how many requests the client sends in one run: one at
// every multiple of 1/rate seconds before Duration.
func (c demoConfig) requests() int64 {
	var n int64
	for c.requestAt(n) < c.Duration {
		n++
	}
	return n
}

// validate reports whether c can be run. The error names the flag at fault.
func (c demoConfig) validate() error {
	if c.LimitPerMinute < 1 {
		return fmt.Errorf("--limit must be at least 1 request per minute, got %d", c.LimitPerMinute)
	}
	if err := c.limit().Validate(); err != nil {
		return fmt.Errorf("--limit %d: %w", c.LimitPerMinute, err)
	}
	if !(c.RatePerSecond > 0) || c.RatePerSecond > maxDemoRate {
		return fmt.Errorf("--rate must be more than 0 and at most %g requests per second, got %g", maxDemoRate, c.RatePerSecond)
	}
	if c.Duration <= 0 || c.Duration > maxDemoDuration {
		return fmt.Errorf("--duration must be more than 0 and at most %s, got %s", maxDemoDuration, c.Duration)
	}
	if n := c.RatePerSecond * c.Duration.Seconds(); n > maxDemoRequests {
		return fmt.Errorf("--rate x --duration is %.0f requests; the demo sends at most %d per run", math.Ceil(n), maxDemoRequests)
	}
	if err := validatePods(c.Pods); err != nil {
		return fmt.Errorf("--pods: %w", err)
	}
	if c.RedisURL != "" {
		if _, err := redis.ParseURL(c.RedisURL); err != nil {
			return fmt.Errorf("--redis: %w", err)
		}
	}
	return nil
}

func validatePods(pods []int) error {
	if len(pods) == 0 {
		return errors.New("list at least one pod count")
	}
	if len(pods) > maxDemoPodCounts {
		return fmt.Errorf("list at most %d pod counts, got %d", maxDemoPodCounts, len(pods))
	}
	for i, n := range pods {
		if n < 1 || n > maxDemoPods {
			return fmt.Errorf("pod count must be between 1 and %d, got %d", maxDemoPods, n)
		}
		if slices.Contains(pods[:i], n) {
			return fmt.Errorf("pod count %d listed twice", n)
		}
	}
	return nil
}

// parsePods parses a comma-separated list of pod counts such as "2,4,10".
func parsePods(s string) ([]int, error) {
	var pods []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a pod count", f)
		}
		pods = append(pods, n)
	}
	if err := validatePods(pods); err != nil {
		return nil, err
	}
	return pods, nil
}

// podsFlag is the flag.Value of --pods.
type podsFlag struct{ pods *[]int }

func (f podsFlag) String() string {
	if f.pods == nil {
		return ""
	}
	s := make([]string, len(*f.pods))
	for i, n := range *f.pods {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (f podsFlag) Set(s string) error {
	pods, err := parsePods(s)
	if err != nil {
		return err
	}
	*f.pods = pods
	return nil
}

// newDemoFlagSet returns the demo's flags, bound to cfg, whose values are
// the defaults.
func newDemoFlagSet(cfg *demoConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice demo", flag.ContinueOnError)
	fs.Int64Var(&cfg.LimitPerMinute, "limit", cfg.LimitPerMinute, "`requests` allowed per minute, also the burst")
	fs.Float64Var(&cfg.RatePerSecond, "rate", cfg.RatePerSecond, "`requests` per second the client sends")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "simulated `time` each run lasts")
	fs.Var(podsFlag{&cfg.Pods}, "pods", "comma-separated pod `counts` to compare")
	fs.StringVar(&cfg.RedisURL, "redis", cfg.RedisURL, "run the shared bucket on Redis at this `URL` (redis://host:port/db) instead of the embedded store")
	return fs
}

// parseDemoFlags parses the demo's command line. It prints nothing: the
// error says what is wrong, and is flag.ErrHelp for -h.
func parseDemoFlags(args []string) (demoConfig, error) {
	cfg := defaultDemoConfig()
	fs := newDemoFlagSet(&cfg)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return demoConfig{}, err
	}
	if fs.NArg() > 0 {
		return demoConfig{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := cfg.validate(); err != nil {
		return demoConfig{}, err
	}
	return cfg, nil
}

func printDemoUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: sluice demo [flags]

Simulates one client sending at a fixed rate through a round-robin load
balancer to N pods, and prints what per-pod token buckets admit next to what
one shared Sluice bucket admits. Time is simulated, so a run takes moments.

Flags:
`)
	cfg := defaultDemoConfig()
	fs := newDemoFlagSet(&cfg)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// fakeClock is a sluice.Clock that reads the simulated time. It is safe for
// concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

var _ sluice.Clock = (*fakeClock)(nil)

func newFakeClock(now time.Time) *fakeClock { return &fakeClock{now: now} }

// Now returns the simulated time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the simulated time to now.
func (c *fakeClock) Set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

// demoResult is what a demo measured.
type demoResult struct {
	Limit   sluice.Limit
	Sent    int64 // requests the client sends in each run
	Ideal   int64 // what the limit permits over the duration, at most Sent
	Columns []podsResult
}

// podsResult is what was admitted with one pod count.
type podsResult struct {
	Pods   int
	PerPod int64 // admitted by per-pod buckets, each on its own memstore
	Shared int64 // admitted by one bucket on the shared store
}

// idealAdmitted returns what limit permits over d to a client that sends
// sent requests: min(sent, Burst + floor(Rate × d / Period)), the token
// bucket's guarantee, computed exactly.
func idealAdmitted(limit sluice.Limit, d time.Duration, sent int64) int64 {
	refill := new(big.Int).Mul(big.NewInt(limit.Rate), big.NewInt(int64(d)))
	refill.Quo(refill, big.NewInt(int64(limit.Period)))
	ideal := new(big.Int).Add(refill, big.NewInt(limit.Burst))
	if ideal.Cmp(big.NewInt(sent)) > 0 {
		return sent
	}
	return ideal.Int64()
}

// sharedKey is the key of the shared bucket in the run with the given pod
// count; tag is unique to the demo run.
func sharedKey(tag string, pods int) string {
	return sluice.Key(tag, "client", "pods", strconv.Itoa(pods))
}

// simulate runs, for every pod count in cfg, the client's requests through
// per-pod buckets and through buckets on shared, and counts what each
// admits. Keys on shared are sharedKey(tag, n). cfg must be valid.
func simulate(ctx context.Context, cfg demoConfig, shared sluice.Store, tag string) (demoResult, error) {
	sent := cfg.requests()
	res := demoResult{
		Limit: cfg.limit(),
		Sent:  sent,
		Ideal: idealAdmitted(cfg.limit(), cfg.Duration, sent),
	}
	for _, n := range cfg.Pods {
		key := sharedKey(tag, n)

		// Per-pod: every pod has its own bucket on its own store.
		clock := newFakeClock(simulationStart())
		pods := make([]sluice.Limiter, n)
		for i := range pods {
			mem, err := memstore.New(memstore.WithClock(clock))
			if err != nil {
				return demoResult{}, err
			}
			l, err := tokenbucket.New(mem, tokenbucket.WithClock(clock))
			if err != nil {
				return demoResult{}, err
			}
			pods[i] = l
		}
		perPod, err := runClient(ctx, cfg, clock, pods, key)
		if err != nil {
			return demoResult{}, fmt.Errorf("per-pod buckets, %d pods: %w", n, err)
		}

		// Shared: every pod has its own limiter, all on one store and key.
		clock = newFakeClock(simulationStart())
		for i := range pods {
			l, err := tokenbucket.New(shared, tokenbucket.WithClock(clock))
			if err != nil {
				return demoResult{}, err
			}
			pods[i] = l
		}
		sharedAdmitted, err := runClient(ctx, cfg, clock, pods, key)
		if err != nil {
			return demoResult{}, fmt.Errorf("shared bucket, %d pods: %w", n, err)
		}

		res.Columns = append(res.Columns, podsResult{Pods: n, PerPod: perPod, Shared: sharedAdmitted})
	}
	return res, nil
}

// simulationStart is the simulated time at which every run starts.
func simulationStart() time.Time { return time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC) }

// runClient sends the client's requests in turn to pods (a round-robin load
// balancer), setting clock to the time of each request, and returns how
// many were allowed.
func runClient(ctx context.Context, cfg demoConfig, clock *fakeClock, pods []sluice.Limiter, key string) (int64, error) {
	limit := cfg.limit()
	start := clock.Now()
	var admitted int64
	for i := range cfg.requests() {
		clock.Set(start.Add(cfg.requestAt(i)))
		d, err := sluice.Allow(ctx, pods[i%int64(len(pods))], key, limit)
		if err != nil {
			return 0, err
		}
		if d.Allowed {
			admitted++
		}
	}
	return admitted, nil
}

// sharedStore is the store the shared bucket runs on.
type sharedStore struct {
	store  sluice.Store
	name   string                                         // what it is, for the output
	detail string                                         // more about it, for the output
	close  func(ctx context.Context, keys []string) error // deletes keys, closes the store
}

// openSharedStore starts the embedded store, or connects to the Redis at
// cfg.RedisURL. tag is the run's unique key tag, named in the description.
func openSharedStore(ctx context.Context, cfg demoConfig, tag string) (*sharedStore, error) {
	if cfg.RedisURL == "" {
		s, err := embedded.Start()
		if err != nil {
			return nil, err
		}
		return &sharedStore{
			store:  s,
			name:   "the embedded store",
			detail: "an in-process miniredis running the Lua script",
			close:  func(context.Context, []string) error { return s.Close() },
		}, nil
	}

	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("--redis: %w", err)
	}
	// A retried script could charge a request twice and skew the counts.
	opts.MaxRetries = -1
	client := redis.NewClient(opts)
	pingCtx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("connect to Redis at %s: %w", opts.Addr, err), client.Close())
	}
	store, err := goredisstore.New(client)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("store on Redis at %s: %w", opts.Addr, err), client.Close())
	}
	return &sharedStore{
		store:  store,
		name:   fmt.Sprintf("Redis at %s, database %d", opts.Addr, opts.DB),
		detail: fmt.Sprintf("through go-redis; keys %s, deleted at the end", sluice.Key(tag, "*")),
		close: func(ctx context.Context, keys []string) error {
			var delErr error
			if err := client.Del(ctx, keys...).Err(); err != nil {
				delErr = fmt.Errorf("delete the demo's keys: %w", err)
			}
			return errors.Join(delErr, client.Close())
		},
	}, nil
}

// runDemo validates cfg, runs the demo and writes the report to w.
func runDemo(ctx context.Context, w io.Writer, cfg demoConfig) (err error) {
	if err := cfg.validate(); err != nil {
		return err
	}
	// A tag unique to the run, so that the demo's keys on a shared Redis
	// collide with nothing.
	tag := "sluice-demo-" + strings.ToLower(rand.Text()[:12])
	shared, err := openSharedStore(ctx, cfg, tag)
	if err != nil {
		return err
	}
	defer func() {
		keys := make([]string, len(cfg.Pods))
		for i, n := range cfg.Pods {
			keys[i] = sharedKey(tag, n) + tokenbucket.KeySuffix // the bucket's Redis key
		}
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
		defer cancel()
		err = errors.Join(err, shared.close(closeCtx, keys))
	}()

	began := time.Now()
	res, err := simulate(ctx, cfg, shared.store, tag)
	if err != nil {
		return err
	}
	elapsed := time.Since(began)
	_, err = io.WriteString(w, formatReport(cfg, res, shared, elapsed))
	return err
}

// formatReport renders res as the demo's output.
func formatReport(cfg demoConfig, res demoResult, shared *sharedStore, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Sluice demo: one client sends %g requests/s for %s, all under one key,\n", cfg.RatePerSecond, cfg.Duration)
	fmt.Fprintf(&b, "through a round-robin load balancer to N pods. Limit: %d per minute, burst %d.\n\n",
		res.Limit.Rate, res.Limit.Burst)
	fmt.Fprintf(&b, "  per-pod: every pod has its own token bucket on its own in-process memstore\n")
	fmt.Fprintf(&b, "  Sluice:  all pods share one token bucket, on %s\n", shared.name)
	fmt.Fprintf(&b, "           (%s)\n\n", shared.detail)

	header := []string{""}
	rows := [][]string{
		{"requests sent"},
		{"admitted by per-pod buckets"},
		{"admitted by Sluice (shared bucket)"},
		{"ideal: what the limit permits"},
		{"over-admission, per-pod"},
		{"over-admission, Sluice"},
	}
	for _, c := range res.Columns {
		header = append(header, fmt.Sprintf("%d pods", c.Pods))
		rows[0] = append(rows[0], strconv.FormatInt(res.Sent, 10))
		rows[1] = append(rows[1], strconv.FormatInt(c.PerPod, 10))
		rows[2] = append(rows[2], strconv.FormatInt(c.Shared, 10))
		rows[3] = append(rows[3], strconv.FormatInt(res.Ideal, 10))
		rows[4] = append(rows[4], overAdmission(c.PerPod, res.Ideal))
		rows[5] = append(rows[5], overAdmission(c.Shared, res.Ideal))
	}
	writeTable(&b, append([][]string{header}, rows...))

	fmt.Fprintf(&b, "\nideal = min(sent, burst + rate x duration / period) = min(%d, %d + %d x %s / %s) = %d\n",
		res.Sent, res.Limit.Burst, res.Limit.Rate, cfg.Duration, res.Limit.Period, res.Ideal)
	fmt.Fprintf(&b, "over-admission = admitted / ideal\n\n")
	fmt.Fprintf(&b, "Each per-pod bucket counts only the requests its pod sees, so N pods admit up\n")
	fmt.Fprintf(&b, "to N times the limit. The shared bucket counts every request once, whatever N is.\n\n")
	fmt.Fprintf(&b, "Every admitted count above comes from running the limiters on a simulated\n")
	fmt.Fprintf(&b, "clock: %d runs of %s took %s of real time.\n", 2*len(res.Columns), cfg.Duration, roundElapsed(elapsed))
	return b.String()
}

func overAdmission(admitted, ideal int64) string {
	return fmt.Sprintf("%.2fx", float64(admitted)/float64(ideal))
}

func roundElapsed(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// writeTable writes rows as a table: the first column left-aligned, the
// others right-aligned, each as wide as its widest cell.
func writeTable(b *strings.Builder, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, row := range rows {
		var line strings.Builder
		for i, cell := range row {
			if i == 0 {
				fmt.Fprintf(&line, "%-*s", widths[0], cell)
			} else {
				fmt.Fprintf(&line, "  %*s", widths[i], cell)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
}
