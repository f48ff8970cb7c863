//go:build unix

package envoydiff_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// runtimeDir is envoyproxy/ratelimit's runtime layout: RUNTIME_ROOT is a
// symlink, as a Kubernetes ConfigMap volume's ..data is, to a directory
// holding RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY/ with the files.
type runtimeDir struct {
	base    string // holds the symlink and every version it pointed to
	version int
}

const (
	subdirectory = "ratelimit"
	appDirectory = "config"
)

func newRuntimeDir(t *testing.T, files map[string]string) *runtimeDir {
	t.Helper()
	r := &runtimeDir{base: t.TempDir()}
	r.swap(t, files)
	return r
}

// root is the path of the symlink, RUNTIME_ROOT.
func (r *runtimeDir) root() string { return filepath.Join(r.base, "current") }

// configDir is the directory the symlink points to now, where the files are.
func (r *runtimeDir) configDir() string {
	return filepath.Join(r.base, fmt.Sprintf("v%d", r.version), subdirectory, appDirectory)
}

// swap writes files (path under the app directory: content) into a new
// version and points the symlink at it by renaming a new symlink over the
// old one, as Kubernetes updates a ConfigMap volume.
func (r *runtimeDir) swap(t *testing.T, files map[string]string) {
	t.Helper()
	r.version++
	for name, content := range files {
		path := filepath.Join(r.configDir(), name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(r.configDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := r.root() + ".new"
	if err := os.Symlink(fmt.Sprintf("v%d", r.version), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, r.root()); err != nil {
		t.Fatal(err)
	}
}

// env is the environment both services are started with: the runtime
// directory and one Redis.
func (r *runtimeDir) env() map[string]string {
	return map[string]string{
		"RUNTIME_ROOT":         r.root(),
		"RUNTIME_SUBDIRECTORY": subdirectory,
		"RUNTIME_APPDIRECTORY": appDirectory,
		"RUNTIME_WATCH_ROOT":   "true",
		"REDIS_SOCKET_TYPE":    "tcp",
		"LOG_LEVEL":            "info",
	}
}

// theirOnlyEnv is set for envoyproxy/ratelimit alone: it sends statsd to
// localhost:8125 unless told not to, and flushes its counters to the
// Prometheus exporter every 10 s by default (Sluice counts at once).
var theirOnlyEnv = map[string]string{
	"USE_STATSD":           "false",
	"STATS_FLUSH_INTERVAL": "100ms",
}

// pairConfig is what a case starts the two services with.
type pairConfig struct {
	files  map[string]string // under the app directory
	env    map[string]string // added to both
	redis  redisKind         // each service's Redis
	shared bool              // one Redis for both (a mixed rolling upgrade)
	noWait bool              // do not wait for either to be healthy
}

// pair is envoyproxy/ratelimit (theirs) and sluice-serve (ours) started on
// the same runtime directory and environment, each with its own Redis.
type pair struct {
	runtime              *runtimeDir
	theirs, ours         *service
	theirRedis, ourRedis redisTarget
}

// startPair starts both services for cfg and, unless cfg.noWait, waits
// until both are healthy.
func startPair(t *testing.T, cfg pairConfig) *pair {
	t.Helper()
	p := &pair{runtime: newRuntimeDir(t, cfg.files)}
	theirBin := theirBinary(t)
	ourBin := ourBinary(t)
	p.theirRedis = startRedisTarget(t, cfg.redis)
	theirEnv := merge(p.runtime.env(), cfg.env, p.theirRedis.env(), theirOnlyEnv)
	p.ourRedis = p.theirRedis
	if !cfg.shared {
		p.ourRedis = startRedisTarget(t, cfg.redis)
	}
	ourEnv := merge(p.runtime.env(), cfg.env, p.ourRedis.env())
	if cfg.noWait {
		p.theirs = launch(t, "theirs", theirBin, theirEnv)
		p.ours = launch(t, "ours", ourBin, ourEnv)
		return p
	}
	p.theirs = launchReady(t, "theirs", theirBin, theirEnv)
	p.ours = launchReady(t, "ours", ourBin, ourEnv)
	return p
}

// both returns the two services, theirs first.
func (p *pair) both() []*service { return []*service{p.theirs, p.ours} }

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// redisKind is REDIS_TYPE: single (a redis-server), cluster (a Redis
// Cluster of 3 primaries) or sentinel (a primary, a replica and three
// sentinels).
type redisKind int

const (
	single redisKind = iota
	cluster
	sentinel
)

// redisTarget is one service's Redis.
type redisTarget struct {
	server   *redistest.RedisServer
	cluster  *redistest.RedisCluster
	sentinel *redistest.SentinelGroup
}

func startRedisTarget(t *testing.T, kind redisKind) redisTarget {
	t.Helper()
	switch kind {
	case cluster:
		return redisTarget{cluster: redistest.StartCluster(t, 3)}
	case sentinel:
		g := redistest.StartSentinelGroup(t)
		return redisTarget{server: g.Primary, sentinel: g}
	}
	return redisTarget{server: redistest.StartRedis(t)}
}

// env is REDIS_TYPE and REDIS_URL for the target, as envoyproxy/ratelimit
// reads them.
func (r redisTarget) env() map[string]string {
	if r.sentinel != nil {
		return map[string]string{
			"REDIS_TYPE": "sentinel",
			"REDIS_URL":  redistest.SentinelMaster + "," + strings.Join(r.sentinel.SentinelAddrs(), ","),
		}
	}
	if r.cluster != nil {
		return map[string]string{
			"REDIS_TYPE": "cluster", "REDIS_URL": strings.Join(r.cluster.Addrs(), ","),
			// radix needs a write flush interval for cluster pipelines.
			"REDIS_PIPELINE_WINDOW": "150us",
		}
	}
	return map[string]string{"REDIS_TYPE": "single", "REDIS_URL": r.server.Addr()}
}

// keys lists every key the target holds, sorted.
func (r redisTarget) keys(t *testing.T) []string {
	t.Helper()
	nodes := []*redistest.RedisServer{r.server}
	if r.cluster != nil {
		nodes = r.cluster.Nodes
	}
	var keys []string
	for _, n := range nodes {
		ks, err := n.DoStrings("KEYS", "*")
		if err != nil {
			t.Fatalf("KEYS * on %s: %v", n.Addr(), err)
		}
		keys = append(keys, ks...)
	}
	sort.Strings(keys)
	return keys
}
