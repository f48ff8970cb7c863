package sluicetest_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// BenchmarkWaitForReplica: what WAIT would cost a decision, on a primary
// with one replica on loopback, over one connection. "decision" is one
// token-bucket decision; "decision+WAIT" follows it with WAIT 1 100 on the
// same connection, which returns once the replica has the write: a
// decision a failover can no longer lose.
func BenchmarkWaitForReplica(b *testing.B) {
	primary := redistest.StartRedis(b)
	redistest.StartReplica(b, primary)
	client := redis.NewClient(&redis.Options{Addr: primary.Addr(), MaxRetries: -1})
	b.Cleanup(func() { _ = client.Close() })
	conn := client.Conn()
	b.Cleanup(func() { _ = conn.Close() })
	store, err := goredisstore.New(conn)
	if err != nil {
		b.Fatal(err)
	}
	l, err := tokenbucket.New(store)
	if err != nil {
		b.Fatal(err)
	}
	key, limit := sluice.Key("wait"), sluice.PerSecond(1_000_000)
	b.Run("decision", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.AllowN(b.Context(), key, limit, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decision+WAIT", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.AllowN(b.Context(), key, limit, 1); err != nil {
				b.Fatal(err)
			}
			if n, err := conn.Wait(b.Context(), 1, 100*time.Millisecond).Result(); err != nil || n != 1 {
				b.Fatalf("WAIT: %d replicas, %v", n, err)
			}
		}
	})
}
