package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/serve/envoyratelimit/settings"
)

// grpcServerTLS is the gRPC server's TLS, as GRPC_SERVER_USE_TLS=true asks
// envoyproxy/ratelimit for it: the certificate and key of
// GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY (one directory, read again
// when an entry of it is written, created or chmod-ed, the pair in force
// kept when the new one does not load); with GRPC_CLIENT_TLS_CACERT, a
// client certificate of that CA required, and with GRPC_CLIENT_TLS_SAN,
// holding that name. It returns the server option and the func that stops
// the watch of the directory.
func grpcServerTLS(s settings.Settings, poll time.Duration, logger *slog.Logger) (grpc.ServerOption, func(), error) {
	if s.GRPCServerTLSCert == "" || s.GRPCServerTLSKey == "" {
		return nil, nil, errors.New("GRPC_SERVER_USE_TLS=true: GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY are required")
	}
	dir := filepath.Dir(s.GRPCServerTLSCert)
	if dir != filepath.Dir(s.GRPCServerTLSKey) {
		return nil, nil, errors.New("GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY must be in the same directory")
	}
	pair := &keyPair{certFile: s.GRPCServerTLSCert, keyFile: s.GRPCServerTLSKey}
	if err := pair.load(); err != nil {
		return nil, nil, fmt.Errorf("GRPC_SERVER_TLS_CERT, GRPC_SERVER_TLS_KEY: %w", err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.get}
	if s.GRPCClientTLSCACert != "" {
		pem, err := os.ReadFile(s.GRPCClientTLSCACert)
		if err != nil {
			return nil, nil, fmt.Errorf("GRPC_CLIENT_TLS_CACERT: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("GRPC_CLIENT_TLS_CACERT %s: no PEM certificate in it", s.GRPCClientTLSCACert)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
		if san := s.GRPCClientTLSSAN; san != "" {
			c.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
				for _, chain := range chains {
					if err := chain[0].VerifyHostname(san); err != nil {
						return fmt.Errorf("the client certificate is not for %s (GRPC_CLIENT_TLS_SAN): %w", san, err)
					}
				}
				return nil
			}
		}
	}
	w := &runtimeWatch{dir: dir}
	w.changed()
	stop := pollRuntime(w, poll, func() {
		if err := pair.load(); err != nil {
			logger.Error("sluice-serve: the gRPC server's certificate does not load; the one in force is kept", "cert", pair.certFile, "err", err)
			return
		}
		logger.Info("sluice-serve: reloaded the gRPC server's certificate", "cert", pair.certFile)
	})
	return grpc.Creds(credentials.NewTLS(c)), stop, nil
}

// keyPair is a certificate and its key, loaded from files.
type keyPair struct {
	certFile, keyFile string
	mu                sync.RWMutex
	cert              *tls.Certificate
}

// load reads the files; on error the pair in force is kept.
func (p *keyPair) load() error {
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.cert = &cert
	p.mu.Unlock()
	return nil
}

func (p *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cert, nil
}
