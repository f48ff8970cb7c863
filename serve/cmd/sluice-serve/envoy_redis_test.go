package main

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/serve/internal/testca"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestEnvoyModeOnRedis: two processes on one redis-server, from
// REDIS_SOCKET_TYPE and REDIS_URL, keep one limit.
func TestEnvoyModeOnRedis(t *testing.T) {
	server := redistest.StartRedis(t)
	_, env := runtimeEnv(t, limits(2))
	env = append(env, "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+server.Addr())
	a, b := startEnvoy(t, env...), startEnvoy(t, env...)
	require.Contains(t, a.logs(), "sluice-serve: on Redis")
	for _, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK} {
		_, code := limitOf(t, a, "u1")
		require.Equal(t, want, code)
	}
	_, code := limitOf(t, b, "u1")
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, code, "the other process counts on the same key")
}

// TestEnvoyModeOnARedisCluster: REDIS_TYPE=cluster (any case) with
// comma-separated seed nodes.
func TestEnvoyModeOnARedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	_, env := runtimeEnv(t, limits(2))
	p := startEnvoy(t, append(env, "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=Cluster", "REDIS_URL="+strings.Join(cluster.Addrs()[:2], ","))...)
	require.Contains(t, p.logs(), "sluice-serve: on Redis")
	for _, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		_, code := limitOf(t, p, "u1")
		require.Equal(t, want, code)
	}
}

// TestEnvoyModeOnSentinel: REDIS_TYPE=sentinel, REDIS_URL the master's
// name then the sentinels.
func TestEnvoyModeOnSentinel(t *testing.T) {
	group := redistest.StartSentinelGroup(t)
	_, env := runtimeEnv(t, limits(2))
	url := redistest.SentinelMaster + "," + strings.Join(group.SentinelAddrs(), ",")
	p := startEnvoy(t, append(env, "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=SENTINEL", "REDIS_URL="+url)...)
	require.Contains(t, p.logs(), "sluice-serve: on Redis")
	for _, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		_, code := limitOf(t, p, "u1")
		require.Equal(t, want, code)
	}
}

// TestEnvoyModeOnRedisOverTLS: REDIS_TLS with REDIS_TLS_CACERT and a
// client certificate (REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY) reaches
// a redis-server that requires one; a server certificate for another name
// is refused unless REDIS_TLS_SKIP_HOSTNAME_VERIFICATION.
func TestEnvoyModeOnRedisOverTLS(t *testing.T) {
	ca := testca.New(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	caFile := write("ca.crt", ca.PEM)
	clientCert, clientKey := ca.Issue(t, 2, "sluice-serve", x509.ExtKeyUsageClientAuth)
	clientCertFile, clientKeyFile := write("client.crt", clientCert), write("client.key", clientKey)

	// redis starts a redis-server whose TLS certificate is for name, and
	// returns its TLS address.
	redis := func(name string) string {
		cert, key := ca.Issue(t, 3, name, x509.ExtKeyUsageServerAuth)
		addr := freeAddr(t)
		_, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		redistest.StartRedis(t, "--tls-port", port, "--tls-cert-file", write(name+".crt", cert), "--tls-key-file", write(name+".key", key),
			"--tls-ca-cert-file", caFile, "--tls-auth-clients", "yes")
		return addr
	}
	_, env := runtimeEnv(t, limits(2))
	env = append(env, "REDIS_SOCKET_TYPE=tcp", "REDIS_TLS=true", "REDIS_TLS_CACERT="+caFile)
	withClientCert := append(env[:len(env):len(env)], "REDIS_TLS_CLIENT_CERT="+clientCertFile, "REDIS_TLS_CLIENT_KEY="+clientKeyFile)

	byIP := redis("127.0.0.1")
	p := startEnvoy(t, append(withClientCert, "REDIS_URL="+byIP)...)
	require.Contains(t, p.logs(), "sluice-serve: on Redis")
	_, code := limitOf(t, p, "u1")
	require.Equal(t, rlsv3.RateLimitResponse_OK, code)

	noCert := launchEnvoy(t, append(env, "REDIS_URL="+byIP)...)
	require.Equal(t, 1, noCert.wait(t), "no client certificate: %s", noCert.logs())
	require.Contains(t, noCert.logs(), "certificate required")

	byName := redis("redis.internal")
	wrongName := launchEnvoy(t, append(withClientCert, "REDIS_URL="+byName)...)
	require.Equal(t, 1, wrongName.wait(t), "a certificate for another name: %s", wrongName.logs())
	require.Contains(t, wrongName.logs(), "x509: cannot validate certificate for 127.0.0.1")
	skip := startEnvoy(t, append(withClientCert, "REDIS_URL="+byName, "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=true")...)
	_, code = limitOf(t, skip, "u1")
	require.Equal(t, rlsv3.RateLimitResponse_OK, code)
}
