package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the name under which [StartSentinelGroup]'s sentinels
// monitor the primary.
const SentinelMaster = "sluice"

// SentinelDownAfter is the sentinels' down-after-milliseconds: a primary
// that does not answer for this long is failed over.
const SentinelDownAfter = 500 * time.Millisecond

// SentinelGroup is a throwaway primary with one replica, watched by three
// sentinels (redis-server --sentinel), all on loopback.
type SentinelGroup struct {
	Primary, Replica *RedisServer
	Sentinels        []*RedisServer
}

// StartSentinelGroup starts a primary and its replica, both with
// serverArgs (such as "--min-replicas-to-write", "1"), and three sentinels
// with a quorum of 2. It returns once the replica's link is up and every
// sentinel knows the replica and the other sentinels. Cleanup stops every
// process.
func StartSentinelGroup(tb testing.TB, serverArgs ...string) *SentinelGroup {
	tb.Helper()
	path := RequireRedisServer(tb)
	g := &SentinelGroup{}
	tb.Cleanup(func() {
		for _, s := range append(g.Sentinels, g.Primary, g.Replica) {
			if s != nil {
				s.Stop()
			}
		}
	})
	var err error
	if g.Primary, err = startRedis(path, tb.TempDir(), serverArgs); err != nil {
		tb.Fatalf("start primary: %v", err)
	}
	replicaArgs := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(g.Primary.port)}, serverArgs...)
	if g.Replica, err = startRedis(path, tb.TempDir(), replicaArgs); err != nil {
		tb.Fatalf("start replica: %v", err)
	}
	if err := waitForReplicaLink(g.Replica); err != nil {
		tb.Fatalf("replica: %v", err)
	}
	for range 3 {
		s, err := startSentinel(path, tb.TempDir(), g.Primary)
		if err != nil {
			tb.Fatalf("start sentinel: %v", err)
		}
		g.Sentinels = append(g.Sentinels, s)
	}
	for _, s := range g.Sentinels {
		if err := waitFor(30*time.Second, func() error {
			info, err := s.Do("INFO", "sentinel")
			if err != nil {
				return err
			}
			if !strings.Contains(info, "slaves=1,sentinels=3") {
				return fmt.Errorf("sentinel %s: %q", s.Addr(), info)
			}
			return nil
		}); err != nil {
			tb.Fatalf("sentinels: %v", err)
		}
	}
	return g
}

// StartReplica starts a replica of primary with serverArgs and returns
// once its link is up. Cleanup stops it.
func StartReplica(tb testing.TB, primary *RedisServer, serverArgs ...string) *RedisServer {
	tb.Helper()
	path := RequireRedisServer(tb)
	args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.port)}, serverArgs...)
	replica, err := startRedis(path, tb.TempDir(), args)
	if err != nil {
		tb.Fatalf("start replica: %v", err)
	}
	tb.Cleanup(replica.Stop)
	if err := waitForReplicaLink(replica); err != nil {
		tb.Fatalf("replica: %v", err)
	}
	return replica
}

// startSentinel starts a sentinel monitoring primary, with a configuration
// file of its own in dir (sentinels rewrite it).
func startSentinel(path, dir string, primary *RedisServer) (*RedisServer, error) {
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
		"sentinel down-after-milliseconds %[1]s %[3]d\n"+
		"sentinel failover-timeout %[1]s 10000\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		SentinelMaster, primary.port, SentinelDownAfter/time.Millisecond)
	var lastErr error
	for range 5 {
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &RedisServer{path: path, port: port, dir: dir, conf: conf, args: []string{"--sentinel"}}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// SentinelAddrs returns the sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Announced reports whether every sentinel names replica as the primary
// (the address clients are told to use, in INFO sentinel). A client learns
// of a failover from one sentinel, and the sentinels learn of it from each
// other a moment apart, so a client has surely been told once all of them
// agree. That follows the replica's promotion by up to a second or two:
// the sentinels poll INFO once a second during a failover.
func (g *SentinelGroup) Announced(replica *RedisServer) bool {
	for _, s := range g.Sentinels {
		info, err := s.Do("INFO", "sentinel")
		if err != nil || !strings.Contains(info, "address="+replica.Addr()+",") {
			return false
		}
	}
	return true
}
