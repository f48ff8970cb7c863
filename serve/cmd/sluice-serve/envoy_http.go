package main

import (
	"context"
	"expvar"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sort"
	"sync"
	"sync/atomic"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// healthName is the gRPC health service envoyproxy/ratelimit reports on,
// beside "" (which grpc-go's health server reports SERVING from the start).
const healthName = "ratelimit"

// envoyHealth is the service's health on GET /healthcheck and
// grpc.health.v1, as envoyproxy/ratelimit's HealthChecker gives it: healthy
// until SIGTERM; with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, also only
// while the configuration in force (the last that loaded) has a domain.
type envoyHealth struct {
	mu         sync.Mutex
	ok         atomic.Bool
	draining   bool
	needConfig bool
	configOK   bool
	grpc       *health.Server
}

// newEnvoyHealth starts healthy, unless needConfig (then configLoaded
// decides).
func newEnvoyHealth(needConfig bool) *envoyHealth {
	h := &envoyHealth{grpc: health.NewServer(), needConfig: needConfig}
	h.update()
	return h
}

// configLoaded records whether the configuration just loaded has a domain.
func (h *envoyHealth) configLoaded(hasDomain bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.configOK = hasDomain
	h.update()
}

// fail turns /healthcheck to 500 and "ratelimit" to NOT_SERVING for good
// ("" keeps SERVING, as in envoyproxy/ratelimit).
func (h *envoyHealth) fail() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.draining = true
	h.update()
}

func (h *envoyHealth) update() {
	ok := !h.draining && (!h.needConfig || h.configOK)
	h.ok.Store(ok)
	status := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		status = healthpb.HealthCheckResponse_SERVING
	}
	h.grpc.SetServingStatus(healthName, status)
}

// ServeHTTP answers 200 "OK" when healthy, else 500 with no body.
func (h *envoyHealth) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if h.ok.Load() {
		_, _ = w.Write([]byte("OK"))
		return
	}
	w.WriteHeader(http.StatusInternalServerError)
}

type rateLimiter interface {
	ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

// jsonHandler is envoyproxy/ratelimit's /json (any method): the body is a
// RateLimitRequest in protojson, the answer its RateLimitResponse in
// protojson, 200 for OK, 429 for OVER_LIMIT and 500 for UNKNOWN; a body
// that does not decode or a request the service refuses is 400 with the
// text "Bad Request".
func jsonHandler(svc rateLimiter, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req rlsv3.RateLimitRequest
		if err == nil {
			err = protojson.Unmarshal(body, &req)
		}
		var resp *rlsv3.RateLimitResponse
		if err == nil {
			resp, err = svc.ShouldRateLimit(r.Context(), &req)
		}
		if err != nil {
			logger.Debug("sluice-serve: /json: bad request", "err", err)
			httpStatus(w, http.StatusBadRequest)
			return
		}
		out, err := protojson.Marshal(resp)
		if resp == nil || err != nil {
			logger.Error("sluice-serve: /json: no response to encode", "err", err)
			httpStatus(w, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch resp.GetOverallCode() {
		case rlsv3.RateLimitResponse_UNKNOWN:
			w.WriteHeader(http.StatusInternalServerError)
		case rlsv3.RateLimitResponse_OVER_LIMIT:
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out)
	})
}

func httpStatus(w http.ResponseWriter, code int) {
	http.Error(w, http.StatusText(code), code)
}

// mainMux is HOST:PORT: /healthcheck and /json.
func mainMux(h *envoyHealth, svc rateLimiter, logger *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthcheck", h)
	mux.Handle("/json", jsonHandler(svc, logger))
	return mux
}

// debugMux is DEBUG_HOST:DEBUG_PORT, as envoyproxy/ratelimit's: the pprof
// profiles under /debug/pprof/, /stats (the expvar variables, one "name:
// value" a line), /rlconfig (dump: the configuration in force, one rule a
// line) and, at any other path, the list of endpoints.
func debugMux(dump func() string) *http.ServeMux {
	endpoints := map[string]string{
		"/rlconfig":            "print out the currently loaded configuration for debugging",
		"/debug/pprof/":        "root of various pprof endpoints. hit for help.",
		"/debug/pprof/profile": "CPU profiling endpoint",
		"/debug/pprof/trace":   "trace endpoint",
		"/stats":               "print out stats",
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/rlconfig", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, dump()) })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		expvar.Do(func(kv expvar.KeyValue) { _, _ = fmt.Fprintf(w, "%s: %s\n", kv.Key, kv.Value) })
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		paths := make([]string, 0, len(endpoints))
		for p := range endpoints {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			_, _ = fmt.Fprintf(w, "%s: %s\n", p, endpoints[p])
		}
	})
	return mux
}
