package redistest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// MiniredisTier is the Lua scripts on miniredis, as the embedded store
// runs them, but with its clock still: the embedded store counts TTLs
// down by the wall clock, and a test that decides on a fake clock would
// see a key expire early whenever a step of it took longer on the wall
// than on its own clock (a loaded machine), and disagree with the other
// tiers. Keys here never expire; their TTLs are read as set.
func MiniredisTier(t *testing.T) sluicetest.Tier {
	server := miniredis.NewMiniRedis()
	if err := server.StartAddr("127.0.0.1:0"); err != nil {
		t.Fatalf("start miniredis: %v", err)
	}
	t.Cleanup(server.Close)
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	tier := goRedisInspect(client)
	tier.Name = "miniredis"
	store, err := goredisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	tier.Store = store
	return tier
}

// GoRedisTier is the Lua scripts on a real redis-server through go-redis.
func GoRedisTier(t *testing.T, server *RedisServer) sluicetest.Tier {
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	tier := goRedisInspect(client)
	tier.Name = "redis/go-redis"
	store, err := goredisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	tier.Store = store
	return tier
}

// DecimalTier is the Lua scripts on a real redis-server through
// DecimalStore: every argument in decimal, as a store unaware of
// sluice.NewHexScript sends them.
func DecimalTier(t *testing.T, server *RedisServer) sluicetest.Tier {
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	tier := goRedisInspect(client)
	tier.Name = "redis/decimal"
	tier.Store = DecimalStore(client)
	return tier
}

// RueidisTier is the Lua scripts on a real redis-server through rueidis.
func RueidisTier(t *testing.T, server *RedisServer) sluicetest.Tier {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis client: %v", err)
	}
	t.Cleanup(client.Close)
	inspect := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = inspect.Close() })
	tier := goRedisInspect(inspect)
	tier.Name = "redis/rueidis"
	store, err := rueidisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	tier.Store = store
	return tier
}

// GoRedisClusterTier is the Lua scripts on a real Redis Cluster through
// the go-redis ClusterClient.
func GoRedisClusterTier(t *testing.T, cluster *RedisCluster) sluicetest.Tier {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	tier := goRedisInspect(client)
	tier.Name = "cluster/go-redis"
	store, err := goredisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	tier.Store = store
	return tier
}

// RueidisClusterTier is the Lua scripts on a real Redis Cluster through
// the rueidis cluster client.
func RueidisClusterTier(t *testing.T, cluster *RedisCluster) sluicetest.Tier {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis cluster client: %v", err)
	}
	t.Cleanup(client.Close)
	inspect := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: -1})
	t.Cleanup(func() { _ = inspect.Close() })
	tier := goRedisInspect(inspect)
	tier.Name = "cluster/rueidis"
	store, err := rueidisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	tier.Store = store
	return tier
}

// goRedisInspect fills Get, TTL and Raw from a go-redis client.
func goRedisInspect(c redis.Cmdable) sluicetest.Tier {
	return sluicetest.Tier{
		Get: func(ctx context.Context, key string) (string, bool, error) {
			kind, err := c.Type(ctx, key).Result()
			switch {
			case err != nil:
				return "", false, err
			case kind == "none":
				return "", false, nil
			case kind == "zset":
				members, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
				return fmt.Sprint(members), err == nil, err
			}
			v, err := c.Get(ctx, key).Result()
			if errors.Is(err, redis.Nil) {
				return "", false, nil
			}
			return v, err == nil, err
		},
		TTL: func(ctx context.Context, key string) (time.Duration, bool, error) {
			d, err := c.PTTL(ctx, key).Result()
			if err != nil || d < 0 {
				return 0, false, err
			}
			return d, true, nil
		},
		Raw: func(ctx context.Context, script *sluice.Script, keys []string, args ...string) ([]int64, error) {
			argv := make([]any, len(args))
			for i, a := range args {
				argv[i] = a
			}
			res, err := c.Eval(ctx, script.Source(), keys, argv...).Int64Slice()
			var reply redis.Error
			if errors.As(err, &reply) && !errors.Is(err, redis.Nil) {
				return nil, ext.NewServerError(reply.Error()) // as a Store returns an error reply
			}
			return res, err
		},
	}
}

// TierMaker makes one tier for a test: the in-process model, miniredis,
// or a real server or Cluster through one client.
type TierMaker struct {
	Name    string
	Cluster bool // a Redis Cluster: one script's keys must share a slot
	Make    func(t *testing.T) sluicetest.Tier
}

// AllTiers lists every tier: the in-process model, miniredis, a real
// redis-server (the package's shared one) and a real 3-primary Redis
// Cluster (the shared one), each through go-redis and rueidis. The real
// servers start when a test first makes their tier.
func AllTiers() []TierMaker {
	return []TierMaker{
		{Name: "memstore", Make: sluicetest.MemTier},
		{Name: "miniredis", Make: MiniredisTier},
		{Name: "redis/go-redis", Make: func(t *testing.T) sluicetest.Tier { return GoRedisTier(t, SharedRedis(t)) }},
		{Name: "redis/rueidis", Make: func(t *testing.T) sluicetest.Tier { return RueidisTier(t, SharedRedis(t)) }},
		{Name: "cluster/go-redis", Cluster: true, Make: func(t *testing.T) sluicetest.Tier { return GoRedisClusterTier(t, SharedCluster(t)) }},
		{Name: "cluster/rueidis", Cluster: true, Make: func(t *testing.T) sluicetest.Tier { return RueidisClusterTier(t, SharedCluster(t)) }},
	}
}
