package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/serve/envoyratelimit"
	"github.com/sluicehq/sluice/serve/envoyratelimit/settings"
	"github.com/sluicehq/sluice/serve/redisconn"
	"github.com/sluicehq/sluice/store/embedded"
)

// openEnvoyStore opens the store the REDIS_* settings name. With REDIS_URL
// unset it starts the embedded store (in process, limits not shared), where
// envoyproxy/ratelimit would dial its default, a twemproxy unix socket. On
// Redis it also returns the count of the client's connections (nil on the
// embedded store).
func openEnvoyStore(ctx context.Context, s settings.Settings, logger *slog.Logger) (sluice.Store, *redisconn.Conns, func() error, error) {
	if !s.RedisURLSet() {
		store, err := embedded.Start()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("embedded store: %w", err)
		}
		logger.Warn("sluice-serve: REDIS_URL is not set: on the embedded store, in this process; its limits are not shared with other replicas")
		return store, nil, store.Close, nil
	}
	spec, err := redisconn.FromEnvoy(s.RedisSocketType, s.RedisType, s.RedisURL, s.RedisAuth, s.RedisSentinelAuth,
		s.RedisTLS, s.RedisPoolSize, s.RedisPipelineWindow)
	if err != nil {
		return nil, nil, nil, err
	}
	if s.RedisTLS {
		if spec.TLSConfig, err = redisTLSConfig(s); err != nil {
			return nil, nil, nil, err
		}
	}
	spec.Conns = &redisconn.Conns{}
	store, closeStore, err := redisconn.Open(ctx, spec)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	logger.Info("sluice-serve: on Redis", "redis", spec.String())
	return store, spec.Conns, closeStore, nil
}

// redisPoolCounts reads conns as envoyproxy/ratelimit's Redis pool stats
// (ratelimit_redis_pool_cx_active, cx_total, cx_local_close) count.
func redisPoolCounts(conns *redisconn.Conns) func() envoyratelimit.RedisPoolCounts {
	return func() envoyratelimit.RedisPoolCounts {
		c := conns.Counts()
		return envoyratelimit.RedisPoolCounts{Active: c.Open, Total: c.Created, LocalClose: c.Closed}
	}
}

// redisTLSConfig is the TLS configuration REDIS_TLS_CLIENT_CERT,
// REDIS_TLS_CLIENT_KEY, REDIS_TLS_CACERT and
// REDIS_TLS_SKIP_HOSTNAME_VERIFICATION ask for: a client certificate when
// both of its files are named, the CA added to the system's roots, and a
// chain verified without its name when asked. nil: the defaults.
func redisTLSConfig(s settings.Settings) (*tls.Config, error) {
	if s.RedisTLSClientCert == "" && s.RedisTLSClientKey == "" && s.RedisTLSCACert == "" && !s.RedisTLSSkipHostnameVerification {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.RedisTLSClientCert != "" && s.RedisTLSClientKey != "" {
		pair, err := tls.LoadX509KeyPair(s.RedisTLSClientCert, s.RedisTLSClientKey)
		if err != nil {
			return nil, fmt.Errorf("REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if s.RedisTLSCACert != "" {
		pem, err := os.ReadFile(s.RedisTLSCACert)
		if err != nil {
			return nil, fmt.Errorf("REDIS_TLS_CACERT: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("REDIS_TLS_CACERT %s: no PEM certificate in it", s.RedisTLSCACert)
		}
		c.RootCAs = pool
	}
	if s.RedisTLSSkipHostnameVerification {
		roots := c.RootCAs
		c.InsecureSkipVerify = true // the chain is verified below, the name is not
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("redis: no server certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, cert := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(cert)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return c, nil
}
