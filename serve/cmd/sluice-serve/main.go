// Command sluice-serve runs sluice serve: Envoy's rate-limit service over
// gRPC and a JSON API over HTTP.
//
// Started with no arguments, it is a drop-in for envoyproxy/ratelimit:
// configured by that service's environment variables and runtime directory
// (see envoy.go and package envoyratelimit/settings), with SLUICE_OVERLAY
// naming an optional overlay file of Sluice's algorithms.
//
// Started with flags, it decides by the policies of one file (package
// serve). From the repository root:
//
//	go run ./serve/cmd/sluice-serve --config serve/policies.example.yaml
//
// Flags:
//
//	--config FILE   the policy file (required)
//	--redis URL     the Redis that servers share the limits on: redis://host:port/db,
//	                rediss://, unix:///path, redis+cluster://host:port,host:port or
//	                redis+sentinel://host:port,host:port/master (package redisconn);
//	                "auto" starts a throwaway redis-server; empty: the embedded store
//	--grpc ADDR     the rate-limit service's address (default 127.0.0.1:8081)
//	--http ADDR     /v1/allow, /healthz, /readyz, /metrics (default 127.0.0.1:8080)
//	--watch D       how often to read the file and reload it when it changed
//	                (default 1s; 0: only on SIGHUP)
//
// A change of the file's content (a ConfigMap's update included) and
// SIGHUP reload the file (a file that does not build is refused, logged,
// and the policies in force kept); SIGTERM or SIGINT drains the calls in
// flight, closes the leases (their tokens go back to the store) and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redisproc"
	"github.com/sluicehq/sluice/serve"
	"github.com/sluicehq/sluice/serve/redisconn"
	"github.com/sluicehq/sluice/store/embedded"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

type flags struct {
	config, redis, grpcAddr, httpAddr string
	watch                             time.Duration
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("sluice serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "the policy file (required)")
	fs.StringVar(&f.redis, "redis", "", `redis://host:port/db, rediss://, unix:///path, redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/master; "auto" starts a redis-server; empty: the embedded store`)
	fs.StringVar(&f.grpcAddr, "grpc", "127.0.0.1:8081", "address of the Envoy rate-limit service (gRPC)")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "address of /v1/allow, /healthz, /readyz and /metrics")
	fs.DurationVar(&f.watch, "watch", time.Second, "how often to read the policy file and reload it when it changed (0: only on SIGHUP)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.watch < 0 {
		return f, fmt.Errorf("--watch %s is negative", f.watch)
	}
	if f.config == "" {
		return f, errors.New("--config is required")
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return f, nil
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		return runEnvoy(os.Environ(), stderr)
	}
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serveUntilSignalled(f, logger); err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 1
	}
	return 0
}

func serveUntilSignalled(f flags, logger *slog.Logger) error {
	// Caught from the start, and until the process ends: a signal sent as
	// soon as the listeners are announced, or again during the drain or
	// the closing of the store, must not find the default action (exit).
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)

	config, err := os.ReadFile(f.config)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	store, conns, closeStore, err := openStore(f.redis, logger)
	if err != nil {
		return err
	}
	defer closeStore()

	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = meters.Shutdown(context.Background()) }()
	if conns != nil {
		if _, err := conns.Observe(meters.Meter("github.com/sluicehq/sluice/serve/cmd/sluice-serve")); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}

	srv, err := serve.New(config, store, meters, logger)
	if err != nil {
		return fmt.Errorf("--config %s: %w", f.config, err)
	}
	grpcListener, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("--grpc: %w", err)
	}
	httpListener, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		_ = grpcListener.Close()
		_ = srv.Close()
		return fmt.Errorf("--http: %w", err)
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	hs := &http.Server{Handler: srv.Handler(promhttp.HandlerFor(registry, promhttp.HandlerOpts{})), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = gs.Serve(grpcListener) }()
	go func() { _ = hs.Serve(httpListener) }()
	logger.Info("sluice serve: listening", "grpc", grpcListener.Addr().String(), "http", httpListener.Addr().String(), "config", f.config)

	stopWatch := func() {}
	if f.watch > 0 {
		stopWatch = watch(srv, f.config, config, f.watch, logger)
	}
	var sig os.Signal
	for sig = range signals {
		if sig != syscall.SIGHUP {
			break
		}
		reload(srv, f.config, logger)
	}
	defer ignoreWhileDraining(signals, logger, "sluice serve")() // before the deferred signal.Stop
	logger.Info("sluice serve: shutting down: draining the calls in flight", "signal", sig.String())
	stopWatch()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	_ = hs.Shutdown(ctx)
	select {
	case <-stopped:
	case <-ctx.Done():
		gs.Stop()
	}
	if err := srv.Close(); err != nil {
		return fmt.Errorf("closing the leases: %w", err)
	}
	logger.Info("sluice serve: stopped")
	return nil
}

func reload(srv *serve.Server, path string, logger *slog.Logger) {
	config, err := os.ReadFile(path)
	if err == nil {
		err = srv.Reload(config)
	}
	if err != nil {
		logger.Error("sluice serve: reload refused; the policies in force are kept", "config", path, "err", err)
		return
	}
	logger.Info("sluice serve: reloaded", "config", path)
}

// watch reads the policy file at path every interval and reloads it when
// its content changed, as a Kubernetes ConfigMap volume changes it (by
// swapping a symlink, which no signal announces). A file that cannot be
// read is read again at the next tick; one that does not build is reported
// once per change, and the policies in force are kept. The returned func
// stops the watch. loaded is the content the server was built from, so
// that a change made since, before the watch began, reloads too.
func watch(srv *serve.Server, path string, loaded []byte, interval time.Duration, logger *slog.Logger) func() {
	w := &contentWatch{path: path, last: loaded}
	return pollRuntime(w, interval, func() { // on the poll's goroutine, right after w.changed
		if err := srv.Reload(w.last); err != nil {
			logger.Error("sluice serve: the policy file changed and does not build; the policies in force are kept", "config", path, "err", err)
			return
		}
		logger.Info("sluice serve: reloaded", "config", path, "on", "change")
	})
}

// openStore opens the store --redis names: a URL of one of
// redisconn.ParseURL's forms (a single server, a Redis Cluster or the
// primary of a Sentinel group), "auto" (a throwaway redis-server), or ""
// (the embedded store). It checks that Redis answers. On Redis, the
// returned Conns counts the client's connections; on the embedded store
// it is nil.
func openStore(url string, logger *slog.Logger) (sluice.Store, *redisconn.Conns, func(), error) {
	if url == "" {
		store, err := embedded.Start()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("embedded store: %w", err)
		}
		logger.Info("sluice serve: on the embedded store (in process; limits are not shared with other servers)")
		return store, nil, func() { _ = store.Close() }, nil
	}
	stopRedis := func() {}
	if url == "auto" {
		server, err := redisproc.Start()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--redis auto: %w", err)
		}
		logger.Info("sluice serve: started redis-server", "pid", server.Pid, "addr", server.Addr)
		url, stopRedis = "redis://"+server.Addr+"/0", server.Stop
	}
	spec, err := redisconn.ParseURL(url)
	if err != nil {
		stopRedis()
		return nil, nil, nil, fmt.Errorf("--redis: %w", err)
	}
	spec.Conns = &redisconn.Conns{}
	store, closeClient, err := redisconn.Open(context.Background(), spec)
	if err != nil {
		stopRedis()
		return nil, nil, nil, fmt.Errorf("--redis: %w", err)
	}
	logger.Info("sluice serve: on Redis", "redis", spec.String())
	return store, spec.Conns, func() { _ = closeClient(); stopRedis() }, nil
}
