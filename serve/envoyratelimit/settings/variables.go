package settings

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Support says what Sluice does with a variable.
type Support string

const (
	// Honoured: Sluice does what the variable asks.
	Honoured Support = "honoured"
	// Ignored: the value is parsed (a malformed one is refused) and has no
	// effect. The variable tunes something Sluice has no equivalent for, or
	// a mode that another variable would have to turn on (and that Sluice
	// refuses).
	Ignored Support = "ignored"
	// Refused: the default is accepted; setting the variable to a value that
	// turns on what it configures stops sluice-serve at start (Refuses says
	// which values).
	Refused Support = "refused"
)

// Variable is one of envoyproxy/ratelimit's environment variables (commit
// 3fb702589d36, src/settings/settings.go), or one it added later (Upstream
// names the commit): those are refused when set to a value that changes
// what theirs does and Sluice does not do, so that a deployment written
// for a later version does not silently run otherwise.
type Variable struct {
	Name    string
	Default string // envoyproxy/ratelimit's default ("" when it has none)
	// Supported is what Sluice does with the variable.
	Supported Support
	// Refuses describes the values FromEnv refuses beyond malformed ones
	// ("" when none).
	Refuses string
	// Note says how Sluice's behaviour relates to envoyproxy/ratelimit's.
	Note string
	// Upstream is "" for a variable of 3fb702589d36, else the later
	// envoyproxy/ratelimit commit that added it.
	Upstream string

	parse  parser
	refuse func(value string) string // the reason a set value is refused, or ""
	// stats: the variable configures the statistics sink only, so that
	// DISABLE_STATS=true, which theirs checks first (runner.go), makes
	// any well-formed value harmless: it is not refused then.
	stats bool
}

var intBits = strconv.IntSize

// Variables lists every variable envoyproxy/ratelimit reads, in the order of
// its settings.go (the later ones where that file now has them).
var Variables = slices.Concat(serverVariables, redisVariables, lastVariables)

var serverVariables = []Variable{
	{Name: "HOST", Default: "0.0.0.0", Supported: Honoured, Note: "HTTP listener: /healthcheck, /json",
		parse: str(func(s *Settings) *string { return &s.Host })},
	{Name: "PORT", Default: "8080", Supported: Honoured,
		parse: port(func(s *Settings) *int { return &s.Port })},
	{Name: "DEBUG_HOST", Default: "0.0.0.0", Supported: Honoured, Note: "debug listener: /debug/pprof/, /stats, /rlconfig",
		parse: str(func(s *Settings) *string { return &s.DebugHost })},
	{Name: "DEBUG_PORT", Default: "6070", Supported: Honoured,
		parse: port(func(s *Settings) *int { return &s.DebugPort })},
	{Name: "GRPC_UDS", Default: "", Supported: Honoured, Note: "gRPC on this unix socket instead of GRPC_HOST:GRPC_PORT",
		parse: str(func(s *Settings) *string { return &s.GRPCUDS })},
	{Name: "GRPC_HOST", Default: "0.0.0.0", Supported: Honoured,
		parse: str(func(s *Settings) *string { return &s.GRPCHost })},
	{Name: "GRPC_PORT", Default: "8081", Supported: Honoured,
		parse: port(func(s *Settings) *int { return &s.GRPCPort })},
	{Name: "GRPC_MAX_CONNECTION_AGE", Default: "24h", Supported: Honoured,
		parse: duration(func(s *Settings) *time.Duration { return &s.GRPCMaxConnectionAge })},
	{Name: "GRPC_MAX_CONNECTION_AGE_GRACE", Default: "1h", Supported: Honoured,
		parse: duration(func(s *Settings) *time.Duration { return &s.GRPCMaxConnectionAgeGrace })},
	{Name: "GRPC_SERVER_USE_TLS", Default: "false", Supported: Honoured,
		Note:  "gRPC over TLS; GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY required, reloaded when their directory changes",
		parse: boolean(func(s *Settings) *bool { return &s.GRPCServerUseTLS })},
	{Name: "GRPC_SERVER_TLS_CERT", Supported: Honoured, Note: "used only with GRPC_SERVER_USE_TLS=true; in the key's directory",
		parse: str(func(s *Settings) *string { return &s.GRPCServerTLSCert })},
	{Name: "GRPC_SERVER_TLS_KEY", Supported: Honoured, Note: "used only with GRPC_SERVER_USE_TLS=true",
		parse: str(func(s *Settings) *string { return &s.GRPCServerTLSKey })},
	{Name: "GRPC_CLIENT_TLS_CACERT", Supported: Honoured, Note: "with TLS: clients must present a certificate of this CA (added to the system's roots)",
		parse: str(func(s *Settings) *string { return &s.GRPCClientTLSCACert })},
	{Name: "GRPC_CLIENT_TLS_SAN", Supported: Honoured, Note: "with a client CA: the name the client's certificate must hold",
		parse: str(func(s *Settings) *string { return &s.GRPCClientTLSSAN })},
	{Name: "LOG_LEVEL", Default: "WARN", Supported: Honoured, Note: "logrus names, any case; trace is debug, fatal and panic are error",
		parse: logLevel},
	{Name: "LOG_FORMAT", Default: "text", Supported: Honoured, Note: "json (any case) for JSON lines, anything else text",
		parse: str(func(s *Settings) *string { return &s.LogFormat })},
	{Name: "CONFIG_TYPE", Default: "FILE", Supported: Honoured, Refuses: "GRPC_XDS_SOTW",
		Note:  "FILE only: configuration from xDS is not supported",
		parse: oneOf(nil, false, "FILE", "GRPC_XDS_SOTW"), refuse: refuseValue("GRPC_XDS_SOTW", "configuration from an xDS server is not supported; use FILE")},
	{Name: "FORCE_START_WITHOUT_INITIAL_CONFIG", Default: "false", Supported: Ignored,
		Note: "the files are always loaded before the listeners open", parse: boolean(nil)},
	{Name: "CONFIG_GRPC_XDS_NODE_ID", Default: "default", Supported: Ignored, Note: "xDS only"},
	{Name: "CONFIG_GRPC_XDS_NODE_METADATA", Supported: Ignored, Note: "xDS only"},
	{Name: "CONFIG_GRPC_XDS_SERVER_URL", Default: "localhost:18000", Supported: Ignored, Note: "xDS only"},
	{Name: "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", Default: "3s", Supported: Ignored, Note: "xDS only", parse: duration(nil)},
	{Name: "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", Supported: Ignored, Note: "xDS only", parse: stringMap},
	{Name: "CONFIG_GRPC_XDS_SERVER_USE_TLS", Default: "false", Supported: Ignored, Note: "xDS only", parse: boolean(nil)},
	{Name: "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", Supported: Ignored, Note: "xDS only"},
	{Name: "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", Supported: Ignored, Note: "xDS only"},
	{Name: "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", Supported: Ignored, Note: "xDS only"},
	{Name: "CONFIG_GRPC_XDS_SERVER_TLS_SAN", Supported: Ignored, Note: "xDS only"},
	{Name: "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", Default: "10s", Supported: Ignored, Note: "xDS only", parse: duration(nil)},
	{Name: "XDS_CLIENT_BACKOFF_MAX_INTERVAL", Default: "60s", Supported: Ignored, Note: "xDS only", parse: duration(nil)},
	{Name: "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", Default: "0.5", Supported: Ignored, Note: "xDS only", parse: float(64)},
	{Name: "XDS_CLIENT_BACKOFF_JITTER", Default: "true", Supported: Ignored, Note: "xDS only", parse: boolean(nil)},
	{Name: "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", Supported: Ignored, Note: "xDS only", parse: integer(intBits, nil)},
	{Name: "USE_DOG_STATSD", Default: "false", Supported: Refused, Refuses: "true, unless DISABLE_STATS=true",
		Note:  "DogStatsD is not supported: use USE_PROMETHEUS",
		parse: boolean(nil), refuse: refuseTrue("DogStatsD is not supported; use USE_PROMETHEUS=true"), stats: true},
	{Name: "USE_DOG_STATSD_MOGRIFIERS", Supported: Ignored, Note: "DogStatsD only"},
	{Name: "USE_STATSD", Default: "true", Supported: Refused, Refuses: "true (when set), unless DISABLE_STATS=true",
		Note:  "statsd is not supported: unset, no statsd is sent (theirs sends to STATSD_HOST:STATSD_PORT by default); use USE_PROMETHEUS",
		parse: boolean(nil), refuse: refuseTrue("statsd is not supported; set USE_STATSD=false and use USE_PROMETHEUS=true"), stats: true},
	{Name: "STATSD_HOST", Default: "localhost", Supported: Ignored, Note: "statsd only"},
	{Name: "STATSD_PORT", Default: "8125", Supported: Ignored, Note: "statsd only", parse: integer(intBits, nil)},
	{Name: "EXTRA_TAGS", Supported: Refused, Refuses: "any non-empty map, unless DISABLE_STATS=true",
		Note:  "extra tags on the server's statistics are not supported",
		parse: stringMap, refuse: refuseNonEmpty("extra tags on the statistics are not supported"), stats: true},
	{Name: "STATS_FLUSH_INTERVAL", Default: "10s", Supported: Ignored,
		Note: "Prometheus metrics are current at every scrape, with no flush", parse: duration(nil)},
	{Name: "DISABLE_STATS", Default: "false", Supported: Honoured,
		Note:  "true: no metrics, USE_PROMETHEUS included; the sinks' variables (USE_STATSD, USE_DOG_STATSD, EXTRA_TAGS, PROMETHEUS_MAPPER_YAML, PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS) are then not refused, as theirs ignores them",
		parse: boolean(func(s *Settings) *bool { return &s.DisableStats })},
	{Name: "USE_PROMETHEUS", Default: "false", Supported: Honoured,
		Note:  "accepted with USE_STATSD unset (theirs then refuses two sinks)",
		parse: boolean(func(s *Settings) *bool { return &s.UsePrometheus })},
	{Name: "PROMETHEUS_ADDR", Default: ":9090", Supported: Honoured, Note: `"" is ":9090", as in theirs`,
		parse: orDefault(":9090", func(s *Settings) *string { return &s.PrometheusAddr })},
	{Name: "PROMETHEUS_PATH", Default: "/metrics", Supported: Honoured, Note: `the one path served; "" is "/metrics", as in theirs`,
		parse: prometheusPath},
	{Name: "PROMETHEUS_MAPPER_YAML", Supported: Refused, Refuses: "any non-empty path, unless DISABLE_STATS=true",
		Note:   "a statsd-exporter mapping of the metric names is not supported",
		refuse: refuseNonEmpty("a mapping of the metric names is not supported"), stats: true},
	{Name: "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", Default: "false", Supported: Refused, Refuses: "true, unless DISABLE_STATS=true",
		Upstream: "6b266b0",
		Note:     "ratelimit_service_response_time_seconds is observed in seconds, as theirs does since; their true (milliseconds, as at 3fb702589d36) is not supported",
		parse:    boolean(nil), refuse: refuseTrue("milliseconds in ratelimit_service_response_time_seconds are not supported; Sluice observes seconds"), stats: true},
	{Name: "RUNTIME_ROOT", Default: "/srv/runtime_data/current", Supported: Honoured,
		parse: str(func(s *Settings) *string { return &s.RuntimeRoot })},
	{Name: "RUNTIME_SUBDIRECTORY", Supported: Honoured,
		Note:  "unset with RUNTIME_WATCH_ROOT=true: Sluice loads RUNTIME_ROOT/RUNTIME_APPDIRECTORY and logs that theirs loads nothing (goruntime's nil loader) and allows every request",
		parse: str(func(s *Settings) *string { return &s.RuntimeSubdirectory })},
	{Name: "RUNTIME_APPDIRECTORY", Default: "config", Supported: Honoured,
		Note:  "with RUNTIME_WATCH_ROOT=true its siblings named RUNTIME_APPDIRECTORY.* load too, as in theirs (logged); a symbolic link to a directory is followed (theirs loads none of its files; logged)",
		parse: str(func(s *Settings) *string { return &s.RuntimeAppDirectory })},
	{Name: "RUNTIME_IGNOREDOTFILES", Default: "false", Supported: Honoured,
		Note:  "a directory named by RUNTIME_* with a leading dot is read all the same (theirs skips it and loads nothing)",
		parse: boolean(func(s *Settings) *bool { return &s.RuntimeIgnoreDotFiles })},
	{Name: "RUNTIME_WATCH_ROOT", Default: "true", Supported: Honoured,
		Note:  "true: reload when the RUNTIME_ROOT symlink changes target; false: when an entry of the directory is written, created, removed, renamed away (theirs does not) or has its mode or owner changed",
		parse: boolean(func(s *Settings) *bool { return &s.RuntimeWatchRoot })},
	{Name: "EXPIRATION_JITTER_MAX_SECONDS", Default: "300", Supported: Ignored,
		Note: "Sluice sets its keys' expiry itself", parse: integer(64, nil)},
	{Name: "LOCAL_CACHE_SIZE_IN_BYTES", Default: "0", Supported: Refused, Refuses: "any value but 0",
		Note:  "the local over-limit cache is not supported",
		parse: integer(intBits, nil), refuse: refuseNonZero("the local over-limit cache is not supported; set 0 or unset it")},
	{Name: "NEAR_LIMIT_RATIO", Default: "0.8", Supported: Honoured,
		Note:  "negative refused; above 1 counts as 1 (theirs underflows its near_limit count on a denial)",
		parse: nearLimitRatio},
	{Name: "CACHE_KEY_PREFIX", Supported: Honoured,
		parse: str(func(s *Settings) *string { return &s.CacheKeyPrefix })},
	{Name: "BACKEND_TYPE", Default: "redis", Supported: Honoured, Refuses: "memcache",
		Note:  `redis (or "") only`,
		parse: oneOf(nil, false, "redis", "", "memcache"), refuse: refuseValue("memcache", "the memcache backend is not supported; use redis")},
	{Name: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", Default: "false", Supported: Refused, Refuses: "true",
		Note:  "not supported: Sluice never charges a denied descriptor, but charges the allowed descriptors of a request that another descriptor denies",
		parse: boolean(nil), refuse: refuseTrue("not supported: Sluice charges the allowed descriptors of a request another descriptor denies")},
	{Name: "LIMIT_RESPONSE_HEADERS_ENABLED", Default: "false", Supported: Honoured,
		parse: boolean(func(s *Settings) *bool { return &s.ResponseHeadersEnabled })},
	{Name: "LIMIT_LIMIT_HEADER", Default: "RateLimit-Limit", Supported: Honoured,
		parse: str(func(s *Settings) *string { return &s.LimitHeader })},
	{Name: "LIMIT_REMAINING_HEADER", Default: "RateLimit-Remaining", Supported: Honoured,
		parse: str(func(s *Settings) *string { return &s.RemainingHeader })},
	{Name: "LIMIT_RESET_HEADER", Default: "RateLimit-Reset", Supported: Honoured,
		parse: str(func(s *Settings) *string { return &s.ResetHeader })},
	{Name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", Default: "false", Supported: Honoured,
		Note:  "healthy only while the configuration in force (the last that loaded) has a domain",
		parse: boolean(func(s *Settings) *bool { return &s.HealthyWithAtLeastOneConfigLoaded })},
}

func nearLimitRatio(s *Settings, v string) error {
	f, err := strconv.ParseFloat(v, 32)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("not a number")
	}
	if f < 0 {
		return errors.New("negative: want 0 to 1 (above 1, no hit counts as near the limit)")
	}
	s.NearLimitRatio = float32(f)
	return nil
}

// orDefault stores v, or def when v is empty.
func orDefault(def string, field func(*Settings) *string) parser {
	return func(s *Settings, v string) error {
		if v == "" {
			v = def
		}
		*field(s) = v
		return nil
	}
}

func prometheusPath(s *Settings, v string) error {
	if v == "" {
		v = "/metrics"
	}
	if !strings.HasPrefix(v, "/") {
		return errors.New(`not a path: want it to start with "/"`)
	}
	s.PrometheusPath = v
	return nil
}

// refuseValue refuses one value.
func refuseValue(value, why string) func(string) string {
	return func(v string) string {
		if v == value {
			return why
		}
		return ""
	}
}

// refuseNonZero refuses an integer other than 0.
func refuseNonZero(why string) func(string) string {
	return func(v string) string {
		if n, err := strconv.ParseInt(v, 0, 64); err == nil && n != 0 {
			return why
		}
		return ""
	}
}
