package coalesce_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// BenchmarkCoalesce compares the token bucket with and without coalescing,
// on one throwaway redis-server, through both clients, at 128 goroutines,
// on one hot key and on 10,000 keys. Besides ns/op it reports
// decisions/s, the server's microseconds per decision (INFO commandstats:
// all EVALSHA time over all decisions) and, coalesced, the mean batch.
//
//	go test -run '^$' -bench BenchmarkCoalesce -benchtime 2s -count 3 ./coalesce/
func BenchmarkCoalesce(b *testing.B) {
	server := redistest.StartRedis(b)
	gr := redis.NewClient(&redis.Options{Addr: server.Addr(), PoolSize: 128, MaxRetries: -1})
	b.Cleanup(func() { _ = gr.Close() })
	ru, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ru.Close)
	rs, err := rueidisstore.New(ru)
	if err != nil {
		b.Fatal(err)
	}
	gs, err := goredisstore.New(gr)
	if err != nil {
		b.Fatal(err)
	}
	stores := []struct {
		name  string
		store sluice.Store
	}{{"rueidis", rs}, {"go-redis", gs}}
	limit := sluice.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000_000_000}
	for _, keys := range []int{1, 10_000} {
		names := make([]string, keys)
		for i := range names {
			names[i] = sluice.Key(fmt.Sprintf("tenant%06d", i))
		}
		for _, s := range stores {
			for _, inFlight := range []int{0, 1, 2, 4, 8, 16} { // 0: not coalesced
				name := fmt.Sprintf("%s/keys=%d/plain", s.name, keys)
				if inFlight > 0 {
					name = fmt.Sprintf("%s/keys=%d/coalesced-inflight=%d", s.name, keys, inFlight)
				}
				b.Run(name, func(b *testing.B) {
					tb, err := tokenbucket.New(s.store)
					if err != nil {
						b.Fatal(err)
					}
					var l sluice.Limiter = tb
					var co *coalesce.Limiter
					if inFlight > 0 {
						co, err = coalesce.New(tb, coalesce.WithMaxInFlight(inFlight))
						if err != nil {
							b.Fatal(err)
						}
						l = co
					}
					for _, k := range names { // warm: every key exists, the script is cached
						if _, err := tb.AllowN(b.Context(), k, limit, 1); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := server.Do("CONFIG", "RESETSTAT"); err != nil {
						b.Fatal(err)
					}
					b.SetParallelism(64) // 128 goroutines on 2 CPUs
					b.ReportAllocs()
					b.ResetTimer()
					start := time.Now()
					var offset atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i := int(offset.Add(7919))
						for pb.Next() {
							i++
							if _, err := l.AllowN(b.Context(), names[i%keys], limit, 1); err != nil {
								b.Error(err)
								return
							}
						}
					})
					elapsed := time.Since(start)
					b.StopTimer()
					b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
					b.ReportMetric(serverMicros(b, server)/float64(b.N), "server-µs/decision")
					if co != nil {
						st := co.Stats()
						b.ReportMetric(float64(b.N)/float64(b.N-int(st.Batched)+int(st.Batches)), "decisions/call")
					}
				})
			}
		}
	}
}

// serverMicros returns the microseconds the server spent in EVALSHA since
// the last CONFIG RESETSTAT.
func serverMicros(tb testing.TB, s *redistest.RedisServer) float64 {
	line, err := s.Info("commandstats", "cmdstat_evalsha")
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range strings.Split(line, ",") {
		if v, ok := strings.CutPrefix(f, "usec="); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatalf("no usec in %q", line)
	return 0
}
