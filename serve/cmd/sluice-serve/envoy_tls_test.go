package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/serve/internal/testca"
)

// TestEnvoyModeGRPCOverTLS: GRPC_SERVER_USE_TLS with a client CA and SAN
// admits only a client certificate of that CA for that name, and a new
// server certificate written in its directory is served to new
// connections.
func TestEnvoyModeGRPCOverTLS(t *testing.T) {
	ca := testca.New(t)
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(t.TempDir(), "ca.crt")
	writeServer := func(serial int64) {
		c, k := ca.Issue(t, serial, "127.0.0.1", x509.ExtKeyUsageServerAuth)
		// The key first, then the certificate renamed in: a reload sees a
		// matching pair.
		require.NoError(t, os.WriteFile(keyFile+".new", k, 0o600))
		require.NoError(t, os.WriteFile(certFile+".new", c, 0o600))
		require.NoError(t, os.Rename(keyFile+".new", keyFile))
		require.NoError(t, os.Rename(certFile+".new", certFile))
	}
	writeServer(10)
	require.NoError(t, os.WriteFile(caFile, ca.PEM, 0o600))

	_, env := runtimeEnv(t, limits(2))
	p := startEnvoy(t, append(env, "GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT="+certFile, "GRPC_SERVER_TLS_KEY="+keyFile,
		"GRPC_CLIENT_TLS_CACERT="+caFile, "GRPC_CLIENT_TLS_SAN=envoy.client")...)
	addr := envoyListening.FindStringSubmatch(p.logs())[1]

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	clientConfig := func(name string) *tls.Config {
		c := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if name != "" {
			certPEM, keyPEM := ca.Issue(t, 20, name, x509.ExtKeyUsageClientAuth)
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			require.NoError(t, err)
			c.Certificates = []tls.Certificate{pair}
		}
		return c
	}
	call := func(c *tls.Config) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(c)))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: desc("user", "u1")})
		return err
	}
	require.NoError(t, call(clientConfig("envoy.client")))
	require.Error(t, call(clientConfig("")), "no client certificate")
	require.Error(t, call(clientConfig("other.client")), "a certificate for another name")

	serial := func() int64 {
		conn, err := tls.Dial("tcp", addr, clientConfig("envoy.client"))
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	require.Equal(t, int64(10), serial())
	writeServer(11)
	require.Eventually(t, func() bool {
		return strings.Contains(p.logs(), "reloaded the gRPC server's certificate") && serial() == 11
	},
		20*time.Second, 10*time.Millisecond, p.logs())
}

// TestEnvoyModeGRPCOverTLSNeedsAKeyPair: GRPC_SERVER_USE_TLS=true without
// a certificate, or with one that does not load, stops the start.
func TestEnvoyModeGRPCOverTLSNeedsAKeyPair(t *testing.T) {
	_, env := runtimeEnv(t, limits(2))
	missing := filepath.Join(t.TempDir(), "tls.crt")
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"GRPC_SERVER_USE_TLS=true"}, "GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY are required"},
		{[]string{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + missing, "GRPC_SERVER_TLS_KEY=" + missing + ".key"}, "GRPC_SERVER_TLS_CERT, GRPC_SERVER_TLS_KEY:"},
	} {
		p := launchEnvoy(t, append(env, c.env...)...)
		require.Equal(t, 1, p.wait(t), p.logs())
		require.Contains(t, p.logs(), c.want)
	}
}
