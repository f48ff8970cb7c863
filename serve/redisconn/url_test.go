package redisconn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/serve/redisconn"
)

// TestParseURL: every form of the --redis URL, and what each refuses.
func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		want redisconn.Spec
	}{
		{"redis://redis:6379/0", redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}}},
		{"redis://redis", redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}}},
		{"REDIS://redis:6380/", redisconn.Spec{Type: "single", Addrs: []string{"redis:6380"}}},
		{"redis://10.0.0.1:7000/3", redisconn.Spec{Type: "single", Addrs: []string{"10.0.0.1:7000"}, DB: 3}},
		{"redis://[::1]:7000/1", redisconn.Spec{Type: "single", Addrs: []string{"[::1]:7000"}, DB: 1}},
		{"redis://[::1]", redisconn.Spec{Type: "single", Addrs: []string{"[::1]:6379"}}},
		{"redis://:s%40cret@redis:6379/0", redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, Password: "s@cret"}},
		{"redis://alice:p%3Ass@redis:6379/2", redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, DB: 2, Username: "alice", Password: "p:ss"}},
		{"redis://a:b@c@redis:6379", redisconn.Spec{Type: "single", Addrs: []string{"redis:6379"}, Username: "a", Password: "b@c"}},
		{"rediss://redis:6380/0?pool_size=50", redisconn.Spec{Type: "single", Addrs: []string{"redis:6380"}, TLS: true, PoolSize: 50}},
		{"unix:///run/redis.sock", redisconn.Spec{Type: "single", Network: "unix", Addrs: []string{"/run/redis.sock"}}},
		{"unix://:pw@/run/redis.sock?db=4", redisconn.Spec{Type: "single", Network: "unix", Addrs: []string{"/run/redis.sock"}, DB: 4, Password: "pw"}},
		{"redis+cluster://n1:7000,n2:7001,n3", redisconn.Spec{Type: "cluster", Addrs: []string{"n1:7000", "n2:7001", "n3:6379"}}},
		{"rediss+cluster://u:p@n1:7000/0", redisconn.Spec{Type: "cluster", Addrs: []string{"n1:7000"}, TLS: true, Username: "u", Password: "p"}},
		{"redis+sentinel://s1,s2:26380,s3/mymaster", redisconn.Spec{Type: "sentinel", Addrs: []string{"s1:26379", "s2:26380", "s3:26379"}, MasterName: "mymaster"}},
		{"redis+sentinel://:pw@s1:26379/mymaster/2?sentinel_password=sp&sentinel_username=su&pool_size=8",
			redisconn.Spec{Type: "sentinel", Addrs: []string{"s1:26379"}, MasterName: "mymaster", DB: 2, Password: "pw",
				SentinelUsername: "su", SentinelPassword: "sp", PoolSize: 8}},
		{"rediss+sentinel://s1:26379/my%20master", redisconn.Spec{Type: "sentinel", Addrs: []string{"s1:26379"}, MasterName: "my master", TLS: true}},
	} {
		t.Run(c.url, func(t *testing.T) {
			got, err := redisconn.ParseURL(c.url)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			again, err := redisconn.ParseURL(got.String())
			if got.Password == "" && got.SentinelPassword == "" {
				require.NoError(t, err)
				require.Equal(t, got, again, "String is read back as the same Spec: %s", got)
			}
		})
	}
}

// TestParseURLRefuses: a URL that is not one of the forms is a clear
// error, and the error never quotes a password.
func TestParseURLRefuses(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"", "no scheme"},
		{"redis:6379", "no scheme"},
		{"mysql://x", `unknown scheme "mysql"`},
		{"http://redis:6379", `unknown scheme "http"`},
		{"redis://", "no host"},
		{"redis:///0", "no host"},
		{"redis://:pw@", "no host"},
		{"redis://redis:0", `port "0"`},
		{"redis://redis:99999", `port "99999"`},
		{"redis://redis:port", `port "port"`},
		{"redis://redis:", `port ""`},
		{"redis://::1:6379", "want host:port"},
		{"redis://redis:6379/x", `database "x"`},
		{"redis://redis:6379/-1", `database "-1"`},
		{"redis://redis:6379/0/1", `path "/0/1"`},
		{"redis://a:6379,b:6379", "a single node has one address, not 2"},
		{"redis://redis?db=2", `unknown parameter "db"`},
		{"redis://redis?dial_timeout=1s", `unknown parameter "dial_timeout"`},
		{"redis://redis?pool_size=-1", `pool_size "-1"`},
		{"redis://redis?pool_size=ten", `pool_size "ten"`},
		{"redis://redis?pool_size=1&pool_size=2", `"pool_size" given 2 times`},
		{"redis://redis?%zz", "query"},
		{"redis://:p%zz@redis", "the password is not percent-encoded properly"},
		{"unix://", "no socket path"},
		{"unix://host/run/redis.sock", "has no host"},
		{"unix:///run/redis.sock?db=x", `db "x"`},
		{"redis+cluster://", "no host"},
		{"redis+cluster://a:1,,b:2", "an empty host in the list"},
		{"redis+cluster://a:1,b:2/3", "database 0 only"},
		{"redis+cluster://a:1?sentinel_password=x", `unknown parameter "sentinel_password"`},
		{"redis+sentinel://s1:26379", "no master name"},
		{"redis+sentinel://s1:26379/", "no master name"},
		{"redis+sentinel://s1:26379/m/x", `database "x"`},
		{"redis+sentinel://s1:26379/m/1/2", `path "/m/1/2": want at most /master/db`},
		{"redis+sentinel://s1:26379/m?db=1", `unknown parameter "db"`},
	} {
		t.Run(c.url, func(t *testing.T) {
			_, err := redisconn.ParseURL(c.url)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "p%zz")
		})
	}
}

// TestStringMasksPasswords: a Spec's String, for logs and errors, never
// shows a password.
func TestStringMasksPasswords(t *testing.T) {
	spec, err := redisconn.ParseURL("rediss+sentinel://alice:hunter2@s1:26379,s2:26379/mymaster/1?sentinel_password=hunter3&pool_size=4")
	require.NoError(t, err)
	require.Equal(t, "rediss+sentinel://alice:xxxxx@s1:26379,s2:26379/mymaster/1?sentinel_password=xxxxx&pool_size=4", spec.String())
	spec, err = redisconn.ParseURL("redis://:hunter2@redis:6379")
	require.NoError(t, err)
	require.Equal(t, "redis://:xxxxx@redis:6379/0", spec.String())
}
