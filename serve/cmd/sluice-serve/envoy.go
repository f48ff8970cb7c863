package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicehq/sluice/serve/envoyratelimit"
	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
	"github.com/sluicehq/sluice/serve/envoyratelimit/settings"
	"github.com/sluicehq/sluice/stack"
)

// envoyPollEnv, when set to a duration, replaces the runtime directory's
// poll interval (1s): for tests.
const envoyPollEnv = "SLUICE_SERVE_RUNTIME_POLL"

// overlayEnv names an overlay file (envoyratelimit.ParseOverlay): Sluice's
// algorithm and decorators for rules of the configuration, by rule name or
// stat key, while the configuration's YAML stays envoyproxy/ratelimit's.
// It is read at start and at every reload, and a change of its content
// reloads (within the poll interval). A file that does not parse refuses
// the reload; one that cannot be read (deleted) once the service runs
// keeps the overlay in force, with which the configuration still reloads.
const overlayEnv = "SLUICE_OVERLAY"

// runEnvoy is sluice-serve started with no arguments: envoyproxy/ratelimit's
// service, configured by its environment (package settings) and its
// runtime directory. It returns the exit code: 2 for settings it refuses,
// 1 for a start that fails (a configuration that does not load included)
// or a drain that does not close cleanly.
func runEnvoy(environ []string, stderr io.Writer) int {
	s, err := settings.FromEnv(environ)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-serve: %v\n", err)
		return 2
	}
	poll := time.Second
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, envoyPollEnv+"="); ok {
			if poll, err = time.ParseDuration(v); err != nil || poll <= 0 {
				fmt.Fprintf(stderr, "sluice-serve: %s=%q: not a positive duration\n", envoyPollEnv, v)
				return 2
			}
		}
	}
	var overlayPath string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, overlayEnv+"="); ok {
			if overlayPath = v; v == "" {
				fmt.Fprintf(stderr, "sluice-serve: %s is set and empty: give the overlay file's path, or unset it\n", overlayEnv)
				return 2
			}
		}
	}
	opts := &slog.HandlerOptions{Level: s.Level()}
	var handler slog.Handler = slog.NewTextHandler(stderr, opts)
	if s.JSONLogs() {
		handler = slog.NewJSONHandler(stderr, opts)
	}
	if err := serveEnvoy(s, poll, overlayPath, slog.New(handler)); err != nil {
		fmt.Fprintf(stderr, "sluice-serve: %v\n", err)
		return 1
	}
	return 0
}

// envoyReloader reloads the runtime directory into the service, one
// reload at a time, all or nothing.
type envoyReloader struct {
	mu      sync.Mutex
	s       settings.Settings
	overlay string // the overlay file's path, "" for none
	svc     *envoyratelimit.Service
	health  *envoyHealth
	logger  *slog.Logger
}

func (r *envoyReloader) reload(on string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := runtimeOf(r.s)
	dir := rt.Dir()
	warnTheirsLoadsNothing(r.logger, rt)
	files, err := rt.Read()
	if err != nil {
		r.logger.Error("sluice-serve: the configuration directory cannot be read; the configuration in force is kept", "dir", dir, "on", on, "err", err)
		return
	}
	overlay, err := readOverlay(r.overlay)
	var unreadable *overlayReadError
	switch {
	case errors.As(err, &unreadable):
		// Deleted, say: no instruction to drop the overlay (that is an
		// overlay of "rules: {}"), and no reason to stop loading the
		// configuration until the file is back.
		r.logger.Error("sluice-serve: the overlay file cannot be read; the overlay in force is kept, and the configuration reloads with it", "on", on, "err", err)
		err = r.svc.Reload(files)
	case err != nil:
		r.logger.Error("sluice-serve: the overlay is refused; the configuration in force is kept", "on", on, "err", err)
		return
	default:
		err = r.svc.ReloadOverlay(files, overlay)
	}
	if err != nil {
		return // logged by the service, which keeps the configuration in force
	}
	r.health.configLoaded(r.svc.Loaded())
	attrs := []any{"dir", dir, "on", on, "files", len(files)}
	if beside := besideDir(dir, files); len(beside) > 0 {
		attrs = append(attrs, "beside_dir", strings.Join(beside, ","))
	}
	r.logger.Info("sluice-serve: reloaded", attrs...)
}

// warnTheirsLoadsNothing logs, at each load, where envoyproxy/ratelimit
// would load none of the configuration directory's files, which Sluice
// loads: a deliberate difference, for a service that loads no rule allows
// every request.
func warnTheirsLoadsNothing(logger *slog.Logger, rt config.Runtime) {
	if why := rt.TheirsLoadsNothing(); why != "" {
		logger.Warn("sluice-serve: envoyproxy/ratelimit would load none of the configuration directory's files here, and allow the requests they limit; Sluice loads them",
			"dir", rt.Dir(), "why", why)
	}
}

// runtimeOf is the runtime directory the RUNTIME_* settings name.
func runtimeOf(s settings.Settings) config.Runtime {
	return config.Runtime{
		Root: s.RuntimeRoot, Subdirectory: s.RuntimeSubdirectory, AppDirectory: s.RuntimeAppDirectory,
		WatchRoot: s.RuntimeWatchRoot, IgnoreDotFiles: s.RuntimeIgnoreDotFiles,
	}
}

// besideDir lists the files of the set that are not under dir: the app
// directory's siblings (config.extra.yaml) that envoyproxy/ratelimit
// loads with RUNTIME_WATCH_ROOT=true.
func besideDir(dir string, files []config.File) []string {
	var out []string
	for _, f := range files {
		if rel, err := filepath.Rel(dir, f.Path); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			out = append(out, f.Path)
		}
	}
	return out
}

// overlayReadError: the overlay file could not be read.
type overlayReadError struct{ err error }

func (e *overlayReadError) Error() string { return overlayEnv + ": " + e.err.Error() }
func (e *overlayReadError) Unwrap() error { return e.err }

// readOverlay reads and parses the overlay file at path; "" is none. A
// file it cannot read is an *overlayReadError.
func readOverlay(path string) (map[string]stack.Spec, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &overlayReadError{err}
	}
	overlay, err := envoyratelimit.ParseOverlay(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", overlayEnv, path, err)
	}
	return overlay, nil
}

func serveEnvoy(s settings.Settings, poll time.Duration, overlayPath string, logger *slog.Logger) error {
	// Caught from the start: a signal sent as soon as the listeners are
	// announced must not find the default action (exit) in place.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)

	// The watches look before the first load, so that a change made
	// while it loads (or before the listeners are announced) reloads.
	runtimeWatch := newRuntimeWatch(s)
	var overlayWatch *overlayWatch
	if overlayPath != "" {
		overlayWatch = newOverlayWatch(overlayPath)
	}
	rt := runtimeOf(s)
	dir := rt.Dir()
	warnTheirsLoadsNothing(logger, rt)
	files, err := rt.Read()
	if err != nil {
		return fmt.Errorf("the configuration directory (RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY): %w", err)
	}
	if beside := besideDir(dir, files); len(beside) > 0 {
		logger.Warn("sluice-serve: loading files beside the configuration directory, named RUNTIME_APPDIRECTORY.*, as envoyproxy/ratelimit does with RUNTIME_WATCH_ROOT=true", "dir", dir, "files", strings.Join(beside, ","))
	}
	overlay, err := readOverlay(overlayPath)
	if err != nil {
		return err
	}
	store, conns, closeStore, err := openEnvoyStore(context.Background(), s, logger)
	if err != nil {
		return err
	}
	defer func() { _ = closeStore() }()

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// envoyproxy/ratelimit's own process stats: gostats' runtime stats,
	// and its Redis pool's (none on the embedded store).
	registry.MustRegister(envoyratelimit.NewRuntimeCollector())
	if conns != nil {
		registry.MustRegister(envoyratelimit.NewRedisPoolCollector(redisPoolCounts(conns)))
	}
	nearLimit := min(float64(s.NearLimitRatio), 1) // above 1 counts no near_limit, as 1 does
	if nearLimit == 0 {
		// NEAR_LIMIT_RATIO=0 makes every threshold 0; Options reads 0 as
		// the default, 0.8.
		nearLimit = math.SmallestNonzeroFloat64
	}
	svc, err := envoyratelimit.New(files, store, envoyratelimit.Options{
		MergeDomainConfig: s.MergeDomainConfig, ShadowMode: s.ShadowMode, NearLimitRatio: nearLimit,
		CacheKeyPrefix: s.CacheKeyPrefix, ResponseHeaders: s.ResponseHeadersEnabled,
		LimitHeader: s.LimitHeader, RemainingHeader: s.RemainingHeader, ResetHeader: s.ResetHeader,
		Registerer: registry, Logger: logger, Overlay: overlay,
	})
	if err != nil {
		return fmt.Errorf("the configuration in %s does not load: %w", dir, err)
	}
	closeSvc := sync.OnceValue(svc.Close)
	defer func() { _ = closeSvc() }()

	grpcOpts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge: s.GRPCMaxConnectionAge, MaxConnectionAgeGrace: s.GRPCMaxConnectionAgeGrace,
		}),
		grpc.ChainUnaryInterceptor(svc.UnaryServerInterceptor()),
	}
	if s.GRPCServerUseTLS {
		creds, stopCertWatch, err := grpcServerTLS(s, poll, logger)
		if err != nil {
			return err
		}
		defer stopCertWatch()
		grpcOpts = append(grpcOpts, creds)
	}
	servers, err := listenEnvoy(s, svc, grpcOpts, registry, logger)
	if err != nil {
		return err
	}
	reloader := &envoyReloader{s: s, overlay: overlayPath, svc: svc, health: servers.health, logger: logger}
	stopPoll := pollRuntime(runtimeWatch, poll, func() { reloader.reload("runtime change") })
	stopOverlayPoll := func() {}
	if overlayWatch != nil {
		stopOverlayPoll = pollRuntime(overlayWatch, poll, func() { reloader.reload("overlay change") })
	}

	var sig os.Signal
	for sig = range signals {
		if sig != syscall.SIGHUP {
			break
		}
		reloader.reload("SIGHUP")
	}
	defer ignoreWhileDraining(signals, logger, "sluice-serve")() // before the deferred signal.Stop
	logger.Info("sluice-serve: shutting down: draining the calls in flight", "signal", sig.String())
	stopPoll()
	stopOverlayPoll()
	servers.drain(10 * time.Second)
	if err := closeSvc(); err != nil {
		return fmt.Errorf("closing the service: %w", err)
	}
	logger.Info("sluice-serve: stopped")
	return nil
}

// envoyServers are the listeners of the compatible mode.
type envoyServers struct {
	health *envoyHealth
	grpc   *grpc.Server
	http   []*http.Server
}

// listenEnvoy opens every listener (or none, on error) and serves them.
func listenEnvoy(s settings.Settings, svc *envoyratelimit.Service, grpcOpts []grpc.ServerOption, registry *prometheus.Registry, logger *slog.Logger) (*envoyServers, error) {
	type listener struct {
		what string
		l    net.Listener
	}
	var ls []listener
	closeAll := func() {
		for _, l := range ls {
			_ = l.l.Close()
		}
	}
	listen := func(what, network, addr string) error {
		l, err := net.Listen(network, addr)
		if err != nil {
			closeAll()
			return fmt.Errorf("%s: %w", what, err)
		}
		ls = append(ls, listener{what, l})
		return nil
	}
	if err := listen("GRPC_UDS, GRPC_HOST, GRPC_PORT", s.GRPCNetwork(), s.GRPCAddr()); err != nil {
		return nil, err
	}
	if err := listen("HOST, PORT", "tcp", s.HTTPAddr()); err != nil {
		return nil, err
	}
	if err := listen("DEBUG_HOST, DEBUG_PORT", "tcp", s.DebugAddr()); err != nil {
		return nil, err
	}
	if s.PrometheusEnabled() {
		if err := listen("PROMETHEUS_ADDR", "tcp", s.PrometheusAddr); err != nil {
			return nil, err
		}
	}

	e := &envoyServers{health: newEnvoyHealth(s.HealthyWithAtLeastOneConfigLoaded)}
	e.health.configLoaded(svc.Loaded())
	e.grpc = grpc.NewServer(grpcOpts...)
	rlsv3.RegisterRateLimitServiceServer(e.grpc, svc)
	healthpb.RegisterHealthServer(e.grpc, e.health.grpc)
	go func() { _ = e.grpc.Serve(ls[0].l) }()

	handlers := []http.Handler{mainMux(e.health, svc, logger), debugMux(svc.Dump)}
	if s.PrometheusEnabled() {
		metrics := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
		handlers = append(handlers, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != s.PrometheusPath {
				http.NotFound(w, r)
				return
			}
			metrics.ServeHTTP(w, r)
		}))
	}
	attrs := []any{"grpc", ls[0].l.Addr().String()}
	for i, h := range handlers {
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		e.http = append(e.http, hs)
		l := ls[i+1].l
		go func() { _ = hs.Serve(l) }()
		attrs = append(attrs, []string{"http", "debug", "prometheus"}[i], l.Addr().String())
	}
	// At Warn, as envoyproxy/ratelimit logs its listeners, so that the
	// default LOG_LEVEL shows where it listens.
	logger.Warn("sluice-serve: listening", attrs...)
	return e, nil
}

// drain fails the health checks, lets the calls in flight finish (within
// timeout, then cuts them) and closes every listener.
func (e *envoyServers) drain(timeout time.Duration) {
	e.health.fail()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() { e.grpc.GracefulStop(); close(stopped) }()
	var wg sync.WaitGroup
	for _, hs := range e.http {
		wg.Go(func() {
			if err := hs.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
				_ = hs.Close()
			}
		})
	}
	wg.Wait()
	select {
	case <-stopped:
	case <-ctx.Done():
		e.grpc.Stop()
	}
}
