package envoyratelimit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// onRedis starts a throwaway redis-server and returns it, a go-redis
// client of it and a store on that client.
func onRedis(t *testing.T) (*redistest.RedisServer, *redis.Client, *goredisstore.Store) {
	t.Helper()
	server := redistest.StartRedis(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	store, err := goredisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	return server, client, store
}

// TestOnRealRedis: the fixed window on a real redis-server (its clock):
// ten of 10 per MINUTE within one window, the counter key carrying the
// prefix and the domain, the descriptor's values as its hash tag. A
// window boundary may fall between two calls, so the eleventh is checked
// only when the answers came from one window.
func TestOnRealRedis(t *testing.T) {
	server, client, store := onRedis(t)
	svc, err := New(apiFiles(t), store, Options{CacheKeyPrefix: "pfx_"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ctx := context.Background()

	call := func() (code string, remaining uint32, reset int64) {
		resp, err := svc.ShouldRateLimit(ctx, req("api", d("per_min", "tenant-7")))
		if err != nil {
			t.Fatal(err)
		}
		s := resp.GetStatuses()[0]
		return s.GetCode().String(), s.GetLimitRemaining(), s.GetDurationUntilReset().GetSeconds()
	}
	for attempt := 0; ; attempt++ {
		if _, err := server.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		var codes []string
		var firstReset, lastReset int64
		for i := range 11 {
			code, remaining, reset := call()
			codes = append(codes, code)
			if i == 0 {
				firstReset = reset
			}
			lastReset = reset
			if i < 10 && remaining != uint32(9-i) && reset <= firstReset {
				t.Fatalf("request %d: remaining %d, want %d", i+1, remaining, 9-i)
			}
		}
		if lastReset > firstReset && attempt < 3 {
			continue // a new minute began during the run: again
		}
		if want := strings.Repeat("OK,", 10) + "OVER_LIMIT"; strings.Join(codes, ",") != want {
			t.Fatalf("codes %v, want %s", codes, want)
		}
		if firstReset < 1 || firstReset > 60 {
			t.Fatalf("duration_until_reset %d s, want 1 to 60", firstReset)
		}
		break
	}
	keys, err := client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !strings.HasPrefix(keys[0], `rl:{"tenant-7"}:erl:pfx_:api:fixedwindow:`) {
		t.Fatalf("keys %q, want one fixed window counter of the descriptor", keys)
	}
}

// TestTheWindowIsRedisTime: a service whose own clock stands half a
// minute away from the redis-server's places a request in the window of
// the server's TIME: duration_until_reset is the time left in Redis's
// minute, not in the service clock's.
func TestTheWindowIsRedisTime(t *testing.T) {
	_, client, store := onRedis(t)
	ctx := context.Background()
	left := func(now time.Time) int64 { return 60 - now.Unix()%60 }
	for attempt := 0; ; attempt++ {
		before, err := client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		skewed := sluicetest.NewFakeClock(before.Add(30 * time.Second))
		svc, err := New(apiFiles(t), store, Options{Clock: skewed})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := svc.ShouldRateLimit(ctx, req("api", d("per_min", fmt.Sprint("clock-", attempt))))
		_ = svc.Close()
		if err != nil {
			t.Fatal(err)
		}
		after, err := client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left(before) != left(after) && attempt < 3 {
			continue // Redis's second changed during the call: again
		}
		got := resp.GetStatuses()[0].GetDurationUntilReset().GetSeconds()
		if got != left(before) && got != left(after) {
			t.Fatalf("duration_until_reset %d s; Redis's minute had %d s left, the service clock's %d", got, left(before), left(skewed.Now()))
		}
		return
	}
}
