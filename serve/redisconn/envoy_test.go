package redisconn_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/serve/redisconn"
)

// envoyVars is one set of envoyproxy/ratelimit's Redis variables, as its
// settings hold them (defaults applied, values parsed).
type envoyVars struct {
	socketType, redisType, url, auth, sentinelAuth string
	tls                                            bool
	poolSize                                       int
	pipelineWindow                                 time.Duration
}

func (v envoyVars) spec() (redisconn.Spec, error) {
	return redisconn.FromEnvoy(v.socketType, v.redisType, v.url, v.auth, v.sentinelAuth, v.tls, v.poolSize, v.pipelineWindow)
}

// TestFromEnvoy: envoyproxy/ratelimit's REDIS_* settings read as its
// driver reads them.
func TestFromEnvoy(t *testing.T) {
	for _, c := range []struct {
		name string
		vars envoyVars
		want redisconn.Spec
	}{
		{"its defaults: a unix socket", envoyVars{socketType: "unix", redisType: "SINGLE", url: "/var/run/nutcracker/ratelimit.sock", poolSize: 10},
			redisconn.Spec{Type: "single", Network: "unix", Addrs: []string{"/var/run/nutcracker/ratelimit.sock"}, PoolSize: 10}},
		{"single over tcp", envoyVars{socketType: "tcp", redisType: "single", url: "redis:6379", poolSize: 10},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, PoolSize: 10}},
		{"a password", envoyVars{socketType: "tcp", redisType: "Single", url: "redis:6379", auth: "s3cret"},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, Password: "s3cret"}},
		{"user:password, split at the first colon", envoyVars{socketType: "tcp", redisType: "single", url: "redis:6379", auth: "alice:pa:ss"},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, Username: "alice", Password: "pa:ss"}},
		{"TLS, and a pipeline window that has no use", envoyVars{socketType: "tcp", redisType: "single", url: "redis:6380", tls: true, pipelineWindow: 150 * time.Microsecond},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6380"}, TLS: true}},
		{"a redis:// address with its credentials and database", envoyVars{socketType: "tcp", redisType: "single", url: "redis://bob:pw@redis:6379/3"},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, Username: "bob", Password: "pw", DB: 3}},
		{"a redis:// address's query", envoyVars{socketType: "tcp", redisType: "single", url: "redis://redis:6379?username=bob&password=pw&db=2"},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, Username: "bob", Password: "pw", DB: 2}},
		{"REDIS_AUTH wins over the URL's", envoyVars{socketType: "tcp", redisType: "single", url: "redis://bob:pw@redis:6379", auth: "carol:other"},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, Username: "carol", Password: "other"}},
		{"a password alone keeps the URL's user", envoyVars{socketType: "tcp", redisType: "single", url: "redis://bob:pw@redis:6379", auth: "other"},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, Username: "bob", Password: "other"}},
		{"cluster, its socket type ignored", envoyVars{socketType: "unix", redisType: "CLUSTER", url: "n1:7000,n2:7001,n3:7002", auth: "pw", poolSize: 20, pipelineWindow: 500 * time.Microsecond},
			redisconn.Spec{Type: "cluster", Addrs: []string{"n1:7000", "n2:7001", "n3:7002"}, Password: "pw", PoolSize: 20}},
		{"cluster of redis:// addresses", envoyVars{socketType: "tcp", redisType: "cluster", url: "redis://:pw@n1:7000,redis://:pw@n2:7001"},
			redisconn.Spec{Type: "cluster", Addrs: []string{"n1:7000", "n2:7001"}, Password: "pw"}},
		{"sentinel", envoyVars{socketType: "unix", redisType: "Sentinel", url: "mymaster,s1:26379,s2:26379,s3:26379", auth: "u:pw", sentinelAuth: "spw", tls: true},
			redisconn.Spec{Type: "sentinel", Addrs: []string{"s1:26379", "s2:26379", "s3:26379"}, MasterName: "mymaster",
				Username: "u", Password: "pw", SentinelPassword: "spw", TLS: true}},
		{"sentinel: a sentinel's URL credentials are the sentinels'", envoyVars{socketType: "tcp", redisType: "sentinel", url: "m,redis://su:sp@s1:26379", auth: "pw"},
			redisconn.Spec{Type: "sentinel", Addrs: []string{"s1:26379"}, MasterName: "m", Password: "pw", SentinelUsername: "su", SentinelPassword: "sp"}},
		{"REDIS_SENTINEL_AUTH is read for sentinel only", envoyVars{socketType: "tcp", redisType: "single", url: "redis:6379", sentinelAuth: "ignored"},
			redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.vars.spec()
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// TestFromEnvoyRefuses: a value envoyproxy/ratelimit would fail on (or
// that makes no sense) is an error that names its variable, and never
// quotes a password.
func TestFromEnvoyRefuses(t *testing.T) {
	ok := envoyVars{socketType: "tcp", redisType: "single", url: "redis:6379", poolSize: 10}
	for _, c := range []struct {
		name   string
		change func(*envoyVars)
		want   string
	}{
		{"an unknown type", func(v *envoyVars) { v.redisType = "ring" }, `REDIS_TYPE "ring": want single, cluster or sentinel`},
		{"an empty type", func(v *envoyVars) { v.redisType = "" }, `REDIS_TYPE ""`},
		{"an unknown socket type", func(v *envoyVars) { v.socketType = "udp" }, `REDIS_SOCKET_TYPE "udp": want tcp or unix`},
		{"a socket type in capitals", func(v *envoyVars) { v.socketType = "TCP" }, `REDIS_SOCKET_TYPE "TCP"`},
		{"an empty URL", func(v *envoyVars) { v.url = "" }, "REDIS_URL is empty"},
		{"no port", func(v *envoyVars) { v.url = "redis" }, `REDIS_URL "redis": address "redis": want host:port`},
		{"a bad port", func(v *envoyVars) { v.url = "redis:http" }, `REDIS_URL "redis:http": address "redis:http": port "http"`},
		{"several nodes for single", func(v *envoyVars) { v.url = "a:1,b:2" }, `REDIS_URL "a:1,b:2": a single node has one address`},
		{"an empty cluster node", func(v *envoyVars) { v.redisType, v.url = "cluster", "a:1,,b:2" }, "an empty address"},
		{"a cluster's database", func(v *envoyVars) { v.redisType, v.url = "cluster", "redis://a:1/2" }, "database 0 only"},
		{"a URL's bad database", func(v *envoyVars) { v.url = "redis://a:1/x" }, `database "x"`},
		{"cluster addresses that disagree", func(v *envoyVars) { v.redisType, v.url = "cluster", "redis://:p1@a:1,redis://:p2@b:2" }, "different users, passwords or databases"},
		{"a bad redis:// URL", func(v *envoyVars) { v.url = "redis://:p%zz@a:1" }, "not a valid redis:// URL"},
		{"a password in a parameter", func(v *envoyVars) { v.url = "redis://a:1?password=p%zz&db=x" }, `"redis://a:1?password=xxxxx&db=x": database "x"`},
		{"sentinel without sentinels", func(v *envoyVars) { v.redisType, v.url = "sentinel", "mymaster" }, "want the master's name and the sentinels"},
		{"sentinel without a master name", func(v *envoyVars) { v.redisType, v.url = "sentinel", ",s1:26379" }, "want the master's name and the sentinels"},
		{"a sentinel's database", func(v *envoyVars) { v.redisType, v.url = "sentinel", "m,redis://s1:26379/1" }, "sentinels have none"},
		{"a negative pool", func(v *envoyVars) { v.poolSize = -1 }, "REDIS_POOL_SIZE -1 is negative"},
		{"a negative window", func(v *envoyVars) { v.pipelineWindow = -time.Millisecond }, "REDIS_PIPELINE_WINDOW -1ms is negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := ok
			c.change(&v)
			_, err := v.spec()
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "p%zz")
		})
	}
}
