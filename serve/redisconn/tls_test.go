package redisconn_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/serve/internal/testca"
	"github.com/sluicehq/sluice/serve/redisconn"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestOpenOverTLS: a redis-server that serves TLS is reached with TLS on
// (rediss://, REDIS_TLS=true) and the caller's TLSConfig; without a root
// that trusts its certificate, or without TLS, Open is an error.
func TestOpenOverTLS(t *testing.T) {
	dir := t.TempDir()
	roots := writeCertificates(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tlsPort := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	redistest.StartRedis(t, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no")
	addr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	trusting := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}

	fromURL := parse(t, "rediss://"+addr)
	require.True(t, fromURL.TLS)
	fromURL.TLSConfig = trusting
	fromEnv, err := redisconn.FromEnvoy("tcp", "single", addr, "", "", true, 10, 0)
	require.NoError(t, err)
	fromEnv.TLSConfig = trusting
	for name, spec := range map[string]redisconn.Spec{"rediss://": fromURL, "REDIS_TLS=true": fromEnv} {
		t.Run(name, func(t *testing.T) { requireDecides(t, open(t, spec), sluicetest.UniqueKey(t)) })
	}

	_, _, err = redisconn.Open(context.Background(), parse(t, "rediss://"+addr))
	require.ErrorContains(t, err, "certificate signed by unknown authority", "the system's roots do not trust the test CA")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _, err = redisconn.Open(ctx, parse(t, "redis://"+addr))
	require.ErrorContains(t, err, "Redis does not answer", "plain text to a TLS port")
}

// writeCertificates writes a CA (ca.pem) and a certificate for 127.0.0.1
// it signed (server.pem, server.key) into dir, and returns a pool that
// trusts the CA.
func writeCertificates(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	ca := testca.New(t)
	cert, key := ca.Issue(t, 2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	for name, data := range map[string][]byte{"ca.pem": ca.PEM, "server.pem": cert, "server.key": key} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	return ca.Pool()
}
