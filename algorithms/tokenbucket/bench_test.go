package tokenbucket_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// The benchmarks below back docs/benchmarks.md. Each starts its own
// redis-server with redistest.StartRedis, never the shared one, so that
// INFO figures are those of the benchmark alone.

const (
	// parallelGoroutines is the number of goroutines the parallel
	// benchmarks aim for (RunParallel runs GOMAXPROCS × parallelism).
	parallelGoroutines = 64
	// manyKeys is the key count of the many-keys variants.
	manyKeys = 10_000
	// memoryKeys is the number of buckets BenchmarkMemoryPerKey creates.
	memoryKeys = 100_000
	// maxBytesPerKey is the memory target per bucket.
	maxBytesPerKey = 120
)

// openLimit allows every request the benchmarks send: a refill of one
// token per microsecond and a burst of 10^12 tokens.
var openLimit = sluice.PerSecond(1_000_000).WithBurst(1_000_000_000_000)

// memoryLimit is the limit of BenchmarkMemoryPerKey: after one request the
// bucket is full again in 6 minutes, so its key outlives the benchmark
// (keys of openLimit expire one second after their last request).
var memoryLimit = sluice.PerHour(10)

// closedLimit allows one request per hour: after the first request every
// decision on the key is a denial, which writes nothing.
var closedLimit = sluice.PerHour(1)

// benchKeys returns n keys built with sluice.Key, each "rl:{tenantNNNNNN}"
// (17 bytes; the bucket stores it as "rl:{tenantNNNNNN}:tb", 20 bytes).
func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = sluice.Key(fmt.Sprintf("tenant%06d", i))
	}
	return keys
}

func newGoRedis(tb testing.TB, server *redistest.RedisServer) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:       server.Addr(),
		PoolSize:   2 * parallelGoroutines,
		MaxRetries: -1,
	})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func newRueidis(tb testing.TB, server *redistest.RedisServer) rueidis.Client {
	tb.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	if err != nil {
		tb.Fatalf("rueidis client: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// newGoRedisStore returns a go-redis store on c.
func newGoRedisStore(tb testing.TB, c redis.Scripter) *goredisstore.Store {
	tb.Helper()
	s, err := goredisstore.New(c)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// newRueidisStore returns a rueidis store on c.
func newRueidisStore(tb testing.TB, c rueidis.Client) *rueidisstore.Store {
	tb.Helper()
	s, err := rueidisstore.New(c)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func newLimiter(tb testing.TB, store sluice.Store) *tokenbucket.Limiter {
	tb.Helper()
	l, err := tokenbucket.New(store)
	if err != nil {
		tb.Fatalf("tokenbucket.New: %v", err)
	}
	return l
}

// warm sends one decision per key so that the script is in the server's
// cache (no NOSCRIPT round trip while timing) and every key exists.
func warm(tb testing.TB, l *tokenbucket.Limiter, keys []string, limit sluice.Limit) {
	tb.Helper()
	ctx := context.Background()
	for _, k := range keys {
		if _, err := l.AllowN(ctx, k, limit, 1); err != nil {
			tb.Fatalf("warm-up AllowN: %v", err)
		}
	}
}

// BenchmarkAllowN measures decisions per second of the token bucket on
// the in-process model and on one local redis-server through go-redis and
// rueidis, serially and from 64 goroutines. keys=1 sends every decision
// to one hot key; keys=10000 cycles over 10,000 keys. The limit is so
// large that every request is allowed (so every decision writes).
func BenchmarkAllowN(b *testing.B) {
	server := redistest.StartRedis(b)
	goClient := newGoRedis(b, server)
	rueClient := newRueidis(b, server)
	limiters := []struct {
		name string
		l    *tokenbucket.Limiter
	}{
		{"model", newLimiter(b, newMemStore(b))},
		{"go-redis", newLimiter(b, newGoRedisStore(b, goClient))},
		{"rueidis", newLimiter(b, newRueidisStore(b, rueClient))},
	}
	for _, nkeys := range []int{1, manyKeys} {
		keys := benchKeys(nkeys)
		for _, lim := range limiters {
			warm(b, lim.l, keys, openLimit)
			b.Run(fmt.Sprintf("%s/serial/keys=%d", lim.name, nkeys), func(b *testing.B) {
				benchSerial(b, lim.l, keys)
			})
			if lim.name == "model" {
				continue
			}
			b.Run(fmt.Sprintf("%s/parallel/keys=%d", lim.name, nkeys), func(b *testing.B) {
				benchParallel(b, lim.l, keys)
			})
		}
	}
}

func benchSerial(b *testing.B, l *tokenbucket.Limiter, keys []string) {
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d, err := l.AllowN(ctx, keys[i%len(keys)], openLimit, 1)
		if err != nil {
			b.Fatal(err)
		}
		if !d.Allowed {
			b.Fatalf("denied: %+v", d)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

func benchParallel(b *testing.B, l *tokenbucket.Limiter, keys []string) {
	ctx := context.Background()
	procs := runtime.GOMAXPROCS(0)
	p := max(1, (parallelGoroutines+procs-1)/procs)
	b.SetParallelism(p)
	var next atomic.Int64 // spreads the goroutines' starting keys
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			d, err := l.AllowN(ctx, keys[i%len(keys)], openLimit, 1)
			if err != nil {
				b.Error(err)
				return
			}
			if !d.Allowed {
				b.Errorf("denied: %+v", d)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(p*procs), "goroutines")
}

// BenchmarkLatency measures, from one goroutine, the latency of PING, of
// AllowN on one hot key, and of the floor script (see floorSource) sent
// through the same store, for each client. Each iteration sends one of
// each, in turn, so that all three see the same conditions; ns/op is their
// sum. It reports the p50 and p99 of PING and AllowN, the ratio of AllowN's
// p50 to PING's ("p50-vs-ping") and the floor's p50 and ratio, which show
// how much of the gap any script with a read and a write would have.
func BenchmarkLatency(b *testing.B) {
	server := redistest.StartRedis(b)
	goClient := newGoRedis(b, server)
	rueClient := newRueidis(b, server)
	clients := []struct {
		name  string
		ping  func(context.Context) error
		store sluice.Store
	}{
		{"go-redis", func(ctx context.Context) error { return goClient.Ping(ctx).Err() },
			newGoRedisStore(b, goClient)},
		{"rueidis", func(ctx context.Context) error { return rueClient.Do(ctx, rueClient.B().Ping().Build()).Error() },
			newRueidisStore(b, rueClient)},
	}
	// The bucket stores key at "rl:{latency}:tb"; the floor's key has the
	// same length.
	key, floorKey := sluice.Key("latency"), sluice.Key("floor00")+tokenbucket.KeySuffix
	floorArgs := []int64{openLimit.Rate, openLimit.PeriodMicros(), openLimit.Burst, 1}
	for _, c := range clients {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			l := newLimiter(b, c.store)
			warm(b, l, []string{key}, openLimit)
			if _, err := c.store.Run(ctx, floorScript, []string{floorKey}, floorArgs); err != nil {
				b.Fatal(err)
			}
			if err := c.ping(ctx); err != nil {
				b.Fatal(err)
			}
			ping := make([]time.Duration, 0, 1<<16)
			allow := make([]time.Duration, 0, 1<<16)
			floor := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				if err := c.ping(ctx); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				d, err := l.AllowN(ctx, key, openLimit, 1)
				t2 := time.Now()
				if err != nil {
					b.Fatal(err)
				}
				if !d.Allowed {
					b.Fatalf("denied: %+v", d)
				}
				t3 := time.Now()
				if _, err := c.store.Run(ctx, floorScript, []string{floorKey}, floorArgs); err != nil {
					b.Fatal(err)
				}
				t4 := time.Now()
				ping = append(ping, t1.Sub(t0))
				allow = append(allow, t2.Sub(t1))
				floor = append(floor, t4.Sub(t3))
			}
			slices.Sort(ping)
			slices.Sort(allow)
			slices.Sort(floor)
			pingP50, allowP50, floorP50 := percentile(ping, 50), percentile(allow, 50), percentile(floor, 50)
			b.ReportMetric(float64(pingP50), "ping-p50-ns")
			b.ReportMetric(float64(percentile(ping, 99)), "ping-p99-ns")
			b.ReportMetric(float64(allowP50), "p50-ns")
			b.ReportMetric(float64(percentile(allow, 99)), "p99-ns")
			b.ReportMetric(float64(allowP50)/float64(pingP50), "p50-vs-ping")
			b.ReportMetric(float64(floorP50), "floor-p50-ns")
			b.ReportMetric(float64(floorP50)/float64(pingP50), "floor-p50-vs-ping")
		})
	}
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100 // ceil(n × p / 100), 1-based
	return sorted[max(i, 1)-1]
}

// floorSource is the least a token bucket decision can do on the server:
// read the clock, read the key, write it with an expiry. It takes the
// token bucket's KEYS and ARGV (ignoring ARGV) and replies with an array of
// the same shape, so that it costs the same to call and to parse.
const floorSource = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], string.format('%d', now), 'PX', 1000)
return {1, 0, 0, 0}
`

var floorScript = sluice.NewScript(floorSource, nil)

// BenchmarkServerCost measures the server-side cost of the token bucket
// script (INFO commandstats, cmdstat_evalsha usec_per_call) next to the
// floor script (TIME + GET + SET PX on one key), with the same client,
// keys and arguments. The two scripts run on two dedicated redis-servers,
// one call to each per iteration, so that each server's commandstats hold
// one script only and both see the same machine load. ns/op is the sum of
// the two round trips.
//
// Workloads: allow/keys=1 and allow/keys=10000 (every request allowed, so
// the script writes); deny/keys=1 (one key with 1 request per hour, spent
// in the warm-up, so every timed decision is a denial, which writes
// nothing; the floor still writes).
func BenchmarkServerCost(b *testing.B) {
	bucketServer := redistest.StartRedis(b)
	floorServer := redistest.StartRedis(b)
	bucketStore := newGoRedisStore(b, newGoRedis(b, bucketServer))
	floorStore := newGoRedisStore(b, newGoRedis(b, floorServer))
	bucket := newLimiter(b, bucketStore)
	workloads := []struct {
		name  string
		keys  []string
		limit sluice.Limit
		allow bool
	}{
		{"allow/keys=1", benchKeys(1), openLimit, true},
		{"allow/keys=10000", benchKeys(manyKeys), openLimit, true},
		{"deny/keys=1", benchKeys(1), closedLimit, false},
	}
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			for _, s := range []*redistest.RedisServer{bucketServer, floorServer} {
				if _, err := s.Do("FLUSHALL"); err != nil {
					b.Fatal(err)
				}
			}
			warm(b, bucket, w.keys, w.limit)
			args := []int64{w.limit.Rate, w.limit.PeriodMicros(), w.limit.Burst, 1}
			// The floor runs on the key names the bucket stores under.
			floorKeys := storedKeys(w.keys)
			for _, k := range floorKeys {
				if _, err := floorStore.Run(ctx, floorScript, []string{k}, args); err != nil {
					b.Fatalf("warm-up floor: %v", err)
				}
			}
			for _, s := range []*redistest.RedisServer{bucketServer, floorServer} {
				if _, err := s.Do("CONFIG", "RESETSTAT"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d, err := bucket.AllowN(ctx, w.keys[i%len(w.keys)], w.limit, 1)
				if err != nil {
					b.Fatal(err)
				}
				if d.Allowed != w.allow {
					b.Fatalf("decision %+v, want Allowed %v", d, w.allow)
				}
				if _, err := floorStore.Run(ctx, floorScript, []string{floorKeys[i%len(floorKeys)]}, args); err != nil {
					b.Fatal(err)
				}
				i++
			}
			bucketCost := evalshaStats(b, bucketServer, b.N)
			floorCost := evalshaStats(b, floorServer, b.N)
			b.ReportMetric(bucketCost.usecPerCall, "script-usec/call")
			b.ReportMetric(floorCost.usecPerCall, "floor-usec/call")
			// The ratio of the totals: usec_per_call is printed with two
			// decimals only.
			b.ReportMetric(float64(bucketCost.usec)/float64(floorCost.usec), "vs-floor")
		})
	}
}

type cmdStats struct {
	calls, usec int64
	usecPerCall float64
}

// evalshaStats reads cmdstat_evalsha from INFO commandstats and checks
// that it counts exactly calls successful calls.
func evalshaStats(tb testing.TB, s *redistest.RedisServer, calls int) cmdStats {
	tb.Helper()
	line, err := s.Info("commandstats", "cmdstat_evalsha")
	if err != nil {
		tb.Fatal(err)
	}
	fields := map[string]string{}
	for f := range strings.SplitSeq(line, ",") {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	var st cmdStats
	var errs []error
	parseInt := func(name string) int64 {
		v, err := strconv.ParseInt(fields[name], 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return v
	}
	st.calls = parseInt("calls")
	st.usec = parseInt("usec")
	failed := parseInt("failed_calls") + parseInt("rejected_calls")
	st.usecPerCall, err = strconv.ParseFloat(fields["usec_per_call"], 64)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		tb.Fatalf("parse %q: %v", line, errs)
	}
	if st.calls != int64(calls) || failed != 0 {
		tb.Fatalf("cmdstat_evalsha %q: want %d successful calls", line, calls)
	}
	return st
}

// setPXMillis is the TTL of the bare SET ... PX keys of
// BenchmarkMemoryPerKey. It outlives the benchmark; its value does not
// change the key's memory (the expiry lives in the expires entry either way).
const setPXMillis = 3_600_000

// memoryShape is one key shape of BenchmarkMemoryPerKey.
type memoryShape struct {
	name string
	// keys are the caller's keys, as passed to AllowN.
	keys []string
	// maxStored is the longest stored key (caller key + KeySuffix) the
	// shape allows.
	maxStored int
}

// shortKeys returns n plain caller keys "uNNNNNN" (7 bytes; stored as
// "uNNNNNN:tb", 10 bytes). They are not built with sluice.Key, whose
// "rl:{tag}" frame alone leaves room for a tag of 4 bytes at most within
// 12 stored bytes.
func shortKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("u%06d", i)
	}
	return keys
}

// storedKeys returns the Redis keys the token bucket stores keys under.
func storedKeys(keys []string) []string {
	stored := make([]string, len(keys))
	for i, k := range keys {
		stored[i] = k + tokenbucket.KeySuffix
	}
	return stored
}

// BenchmarkMemoryPerKey measures the memory of 100,000 token buckets on a
// dedicated redis-server, for two key shapes, since Redis's cost per key
// depends on the key's length: the key is an sds string (header, bytes and
// NUL) allocated in the allocator's size classes, 16 bytes apart with the
// Debian build's jemalloc. Counting a 3-byte header, a key of up to 12
// bytes fits a 16-byte allocation; measured on redis-server 7.0.15, keys
// of up to 14 bytes do, consistent with the 1-byte header sds gives
// strings under 32 bytes (docs/benchmarks.md, section 4).
//
//   - short: caller keys fmt.Sprintf("u%06d", i), stored as "u000000:tb"
//     and so on (10 bytes; the benchmark checks that every stored key of
//     the shape is at most 12 bytes long, within either bound);
//   - typical: caller keys sluice.Key(fmt.Sprintf("tenant%06d", i)), stored
//     as "rl:{tenant000000}:tb" and so on (20 bytes).
//
// For each shape, "<shape>-bytes/key" is the growth of INFO memory
// used_memory (less the connections' buffers, mem_clients_normal: see
// settledUsedMemory) over one AllowN on each of the 100,000 keys, divided by
// 100,000. "<shape>-set-px-bytes/key" is the same figure for a bare
// SET key <integer> PX on the same key names, each set to the very integer
// its bucket stored (read back with MGET before the flush): the least any
// integer state with an expiry costs on this server, whatever the script.
// "<shape>-script-minus-set-px" is the difference of the two (bytes per
// key), "<shape>-key-bytes" the length of the stored keys and
// "<shape>-memory-usage-bytes" MEMORY USAGE of the shape's first bucket
// key. "jemalloc-quantum" is the allocator's size-class spacing.
//
// Memory is deterministic, not a timing: run it with -benchtime 1x. Each
// iteration flushes the server before every measurement; ns/op is
// meaningless (it includes the settling sleeps).
func BenchmarkMemoryPerKey(b *testing.B) {
	server := redistest.StartRedis(b)
	client := newRueidis(b, server)
	l := newLimiter(b, newRueidisStore(b, client))
	shapes := []memoryShape{
		{name: "short", keys: shortKeys(memoryKeys), maxStored: 12},
		{name: "typical", keys: benchKeys(memoryKeys), maxStored: 30},
	}
	for _, s := range shapes {
		want := len(s.keys[0] + tokenbucket.KeySuffix)
		for _, k := range storedKeys(s.keys) {
			if len(k) != want || len(k) > s.maxStored {
				b.Fatalf("%s: stored key %q is %d bytes, want %d and at most %d", s.name, k, len(k), want, s.maxStored)
			}
		}
	}
	// Load the script and open the client's connections before measuring.
	warm(b, l, shapes[0].keys[:1], memoryLimit)

	type result struct {
		bucket, setPX int64 // growth of used_memory over all keys
		usage         string
	}
	results := make([]result, len(shapes))
	b.ReportAllocs()
	for b.Loop() {
		for si, s := range shapes {
			stored := storedKeys(s.keys)
			r := &results[si]
			r.bucket = memoryGrowth(b, server, len(s.keys), func(ctx context.Context, i int) error {
				d, err := l.AllowN(ctx, s.keys[i], memoryLimit, 1)
				if err == nil && !d.Allowed {
					err = fmt.Errorf("denied: %+v", d)
				}
				return err
			})
			var err error
			r.usage, err = server.Do("MEMORY", "USAGE", stored[0], "SAMPLES", "0")
			if err != nil {
				b.Fatal(err)
			}
			values := storedValues(b, client, stored)
			r.setPX = memoryGrowth(b, server, len(stored), func(ctx context.Context, i int) error {
				return client.Do(ctx, client.B().Set().Key(stored[i]).Value(values[i]).PxMilliseconds(setPXMillis).Build()).Error()
			})
		}
	}
	for si, s := range shapes {
		r := results[si]
		n := float64(len(s.keys))
		bucket, setPX := float64(r.bucket)/n, float64(r.setPX)/n
		usageBytes, err := strconv.ParseFloat(r.usage, 64)
		if err != nil {
			b.Fatalf("%s: MEMORY USAGE %q: %v", s.name, r.usage, err)
		}
		keyBytes := len(s.keys[0] + tokenbucket.KeySuffix)
		b.ReportMetric(bucket, s.name+"-bytes/key")
		b.ReportMetric(setPX, s.name+"-set-px-bytes/key")
		b.ReportMetric(bucket-setPX, s.name+"-script-minus-set-px")
		b.ReportMetric(float64(keyBytes), s.name+"-key-bytes")
		b.ReportMetric(usageBytes, s.name+"-memory-usage-bytes")
		verdict := "met"
		if bucket > maxBytesPerKey {
			verdict = "not met"
		}
		b.Logf("%s keys (%d bytes, e.g. %q): %.2f bytes/key, bare SET PX %.2f; script - SET PX %+d bytes over %d keys; %d-byte target %s",
			s.name, keyBytes, s.keys[0]+tokenbucket.KeySuffix, bucket, setPX, r.bucket-r.setPX, len(s.keys), maxBytesPerKey, verdict)
	}
	b.ReportMetric(float64(jemallocQuantum(b, server)), "jemalloc-quantum")
}

// storedValues reads the value of every key with MGET and checks that
// each is an integer, as a bucket's state is.
func storedValues(tb testing.TB, client rueidis.Client, keys []string) []string {
	tb.Helper()
	ctx := context.Background()
	values := make([]string, 0, len(keys))
	for start := 0; start < len(keys); start += 1000 {
		chunk := keys[start:min(start+1000, len(keys))]
		reply, err := client.Do(ctx, client.B().Mget().Key(chunk...).Build()).ToArray()
		if err != nil {
			tb.Fatalf("MGET: %v", err)
		}
		if len(reply) != len(chunk) {
			tb.Fatalf("MGET: %d values for %d keys", len(reply), len(chunk))
		}
		for i, m := range reply {
			v, err := m.ToString()
			if err != nil {
				tb.Fatalf("MGET %s: %v", chunk[i], err)
			}
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				tb.Fatalf("%s holds %q, not an integer", chunk[i], v)
			}
			values = append(values, v)
		}
	}
	return values
}

// memoryGrowth flushes the server, creates n keys by calling create with
// 0 … n-1 (from several goroutines), checks that DBSIZE is n and returns
// the growth of settledUsedMemory (bytes, over all n keys).
func memoryGrowth(tb testing.TB, server *redistest.RedisServer, n int, create func(ctx context.Context, i int) error) int64 {
	tb.Helper()
	if _, err := server.Do("FLUSHALL"); err != nil {
		tb.Fatal(err)
	}
	before := settledUsedMemory(tb, server)

	const workers = 16
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := create(ctx, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}

	after := settledUsedMemory(tb, server)
	dbsize, err := server.Do("DBSIZE")
	if err != nil {
		tb.Fatal(err)
	}
	if dbsize != strconv.Itoa(n) {
		tb.Fatalf("DBSIZE %s, want %d", dbsize, n)
	}
	return after - before
}

// settledUsedMemory is the server's settled used_memory, without the
// connections' buffers (redistest.RedisServer.SettledUsedMemory).
func settledUsedMemory(tb testing.TB, s *redistest.RedisServer) int64 {
	tb.Helper()
	n, err := s.SettledUsedMemory()
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// jemallocQuantum returns the "Quantum size" of MEMORY MALLOC-STATS, or 0
// when the server does not use jemalloc.
func jemallocQuantum(tb testing.TB, s *redistest.RedisServer) int {
	tb.Helper()
	out, err := s.Do("MEMORY", "MALLOC-STATS")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Quantum size:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				tb.Fatalf("quantum %q: %v", v, err)
			}
			return n
		}
	}
	return 0
}
