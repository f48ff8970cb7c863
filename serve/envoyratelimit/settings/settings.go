// Package settings reads envoyproxy/ratelimit's environment variables as
// sluice-serve's compatible mode honours them.
//
// Every variable envoyproxy/ratelimit reads is listed in [Variables] with its
// default and what Sluice does with it. [FromEnv] parses them as
// envoyproxy/ratelimit does (kelseyhightower/envconfig: booleans by
// strconv.ParseBool, integers by strconv.ParseInt with base prefixes,
// durations by time.ParseDuration; an unset variable takes its default, a
// variable set to the empty string is parsed as such), and refuses to start a
// server that would silently do something other than what was asked: a
// malformed value, or a variable set to a value that asks for what Sluice does
// not do (BACKEND_TYPE=memcache, USE_STATSD=true, ...), is an error naming the
// variable. DISABLE_STATS=true wins over the statistics sinks' variables,
// as it does in theirs: USE_STATSD=true is then accepted.
package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Settings are the values of the variables Sluice honours. Variables that
// Sluice accepts but ignores are parsed (a malformed value is refused) and
// not kept.
type Settings struct {
	Host      string // HOST: the HTTP listener (/healthcheck, /json)
	Port      int    // PORT
	DebugHost string // DEBUG_HOST: the debug listener (/debug/pprof, /stats, /rlconfig)
	DebugPort int    // DEBUG_PORT
	GRPCHost  string // GRPC_HOST: the rate-limit service and grpc.health.v1
	GRPCPort  int    // GRPC_PORT
	GRPCUDS   string // GRPC_UDS: a unix socket for gRPC instead of GRPC_HOST:GRPC_PORT

	GRPCServerUseTLS    bool   // GRPC_SERVER_USE_TLS
	GRPCServerTLSCert   string // GRPC_SERVER_TLS_CERT
	GRPCServerTLSKey    string // GRPC_SERVER_TLS_KEY
	GRPCClientTLSCACert string // GRPC_CLIENT_TLS_CACERT
	GRPCClientTLSSAN    string // GRPC_CLIENT_TLS_SAN

	GRPCMaxConnectionAge      time.Duration // GRPC_MAX_CONNECTION_AGE
	GRPCMaxConnectionAgeGrace time.Duration // GRPC_MAX_CONNECTION_AGE_GRACE

	LogLevel  string // LOG_LEVEL, as logrus names levels (see Level)
	LogFormat string // LOG_FORMAT: "json" (any case) or text

	RuntimeRoot           string // RUNTIME_ROOT
	RuntimeSubdirectory   string // RUNTIME_SUBDIRECTORY
	RuntimeAppDirectory   string // RUNTIME_APPDIRECTORY
	RuntimeIgnoreDotFiles bool   // RUNTIME_IGNOREDOTFILES
	RuntimeWatchRoot      bool   // RUNTIME_WATCH_ROOT

	DisableStats   bool   // DISABLE_STATS: no metrics at all (Prometheus included)
	UsePrometheus  bool   // USE_PROMETHEUS
	PrometheusAddr string // PROMETHEUS_ADDR
	PrometheusPath string // PROMETHEUS_PATH

	NearLimitRatio float32 // NEAR_LIMIT_RATIO, parsed as a float32 as theirs is
	CacheKeyPrefix string  // CACHE_KEY_PREFIX

	ResponseHeadersEnabled bool   // LIMIT_RESPONSE_HEADERS_ENABLED
	LimitHeader            string // LIMIT_LIMIT_HEADER
	RemainingHeader        string // LIMIT_REMAINING_HEADER
	ResetHeader            string // LIMIT_RESET_HEADER

	HealthyWithAtLeastOneConfigLoaded bool // HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED

	RedisSocketType     string        // REDIS_SOCKET_TYPE: tcp or unix
	RedisType           string        // REDIS_TYPE, lower-cased: single, sentinel or cluster
	RedisURL            string        // REDIS_URL (see RedisURLSet)
	RedisPoolSize       int           // REDIS_POOL_SIZE
	RedisAuth           string        // REDIS_AUTH: password, or user:password
	RedisTLS            bool          // REDIS_TLS
	RedisPipelineWindow time.Duration // REDIS_PIPELINE_WINDOW: checked (not negative), without effect
	RedisSentinelAuth   string        // REDIS_SENTINEL_AUTH

	RedisTLSClientCert               string // REDIS_TLS_CLIENT_CERT
	RedisTLSClientKey                string // REDIS_TLS_CLIENT_KEY
	RedisTLSCACert                   string // REDIS_TLS_CACERT
	RedisTLSSkipHostnameVerification bool   // REDIS_TLS_SKIP_HOSTNAME_VERIFICATION

	ShadowMode        bool // SHADOW_MODE
	MergeDomainConfig bool // MERGE_DOMAIN_CONFIG

	set map[string]bool
}

// IsSet reports whether the environment FromEnv read set the variable
// (to any value, the empty string included).
func (s Settings) IsSet(name string) bool { return s.set[name] }

// RedisURLSet reports whether REDIS_URL was set. When it was not, Sluice
// runs on its embedded store (limits not shared between processes) instead
// of dialling envoyproxy/ratelimit's default, a twemproxy unix socket.
func (s Settings) RedisURLSet() bool { return s.IsSet("REDIS_URL") }

// HTTPAddr is HOST:PORT.
func (s Settings) HTTPAddr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// DebugAddr is DEBUG_HOST:DEBUG_PORT.
func (s Settings) DebugAddr() string {
	return net.JoinHostPort(s.DebugHost, strconv.Itoa(s.DebugPort))
}

// GRPCNetwork and GRPCAddr are where the gRPC server listens: ("unix",
// GRPC_UDS) when GRPC_UDS is set, else ("tcp", GRPC_HOST:GRPC_PORT).
func (s Settings) GRPCNetwork() string {
	if s.GRPCUDS != "" {
		return "unix"
	}
	return "tcp"
}

// GRPCAddr: see GRPCNetwork.
func (s Settings) GRPCAddr() string {
	if s.GRPCUDS != "" {
		return s.GRPCUDS
	}
	return net.JoinHostPort(s.GRPCHost, strconv.Itoa(s.GRPCPort))
}

// ConfigDir is the directory of configuration files:
// $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY.
func (s Settings) ConfigDir() string {
	return filepath.Join(s.RuntimeRoot, s.RuntimeSubdirectory, s.RuntimeAppDirectory)
}

// PrometheusEnabled reports whether metrics are served at PROMETHEUS_ADDR:
// USE_PROMETHEUS=true and DISABLE_STATS not true (DISABLE_STATS wins, as in
// envoyproxy/ratelimit).
func (s Settings) PrometheusEnabled() bool { return s.UsePrometheus && !s.DisableStats }

// Level is LOG_LEVEL as a slog level: trace and debug are Debug, info is
// Info, warn and warning are Warn, error, fatal and panic are Error.
func (s Settings) Level() slog.Level {
	l, _ := parseLevel(s.LogLevel)
	return l
}

// JSONLogs reports whether LOG_FORMAT asks for JSON logs.
func (s Settings) JSONLogs() bool { return strings.EqualFold(s.LogFormat, "json") }

// FromEnv reads the variables of environ (os.Environ's "NAME=value" form;
// a later entry for a name wins, as in os.Getenv). It returns an error
// naming each variable that is malformed or set to a value Sluice refuses.
func FromEnv(environ []string) (Settings, error) {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok {
			env[name] = value
		}
	}
	s := Settings{set: map[string]bool{}}
	type failure struct {
		err   error
		stats bool // a refusal DISABLE_STATS=true lifts
	}
	var fails []failure
	for _, v := range Variables {
		value, ok := env[v.Name]
		if ok {
			s.set[v.Name] = true
		} else if v.Default == "" {
			continue // envconfig leaves it at its zero value
		} else {
			value = v.Default
		}
		if v.parse != nil {
			if err := v.parse(&s, value); err != nil {
				fails = append(fails, failure{err: fmt.Errorf("%s=%q: %w", v.Name, value, err)})
				continue
			}
		}
		if ok && v.refuse != nil {
			if why := v.refuse(value); why != "" {
				fails = append(fails, failure{fmt.Errorf("%s=%q: %s", v.Name, value, why), v.stats})
			}
		}
	}
	var errs []error
	for _, f := range fails {
		if !f.stats || !s.DisableStats {
			errs = append(errs, f.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, err
	}
	return s, nil
}
