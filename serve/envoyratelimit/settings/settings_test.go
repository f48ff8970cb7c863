package settings

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDefaultsAreEnvoyRatelimits(t *testing.T) {
	s, err := FromEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"HTTPAddr", s.HTTPAddr(), "0.0.0.0:8080"},
		{"DebugAddr", s.DebugAddr(), "0.0.0.0:6070"},
		{"GRPCNetwork", s.GRPCNetwork(), "tcp"},
		{"GRPCAddr", s.GRPCAddr(), "0.0.0.0:8081"},
		{"GRPCMaxConnectionAge", s.GRPCMaxConnectionAge, 24 * time.Hour},
		{"GRPCMaxConnectionAgeGrace", s.GRPCMaxConnectionAgeGrace, time.Hour},
		{"Level", s.Level(), slog.LevelWarn},
		{"JSONLogs", s.JSONLogs(), false},
		{"ConfigDir", s.ConfigDir(), "/srv/runtime_data/current/config"},
		{"RuntimeWatchRoot", s.RuntimeWatchRoot, true},
		{"RuntimeIgnoreDotFiles", s.RuntimeIgnoreDotFiles, false},
		{"PrometheusEnabled", s.PrometheusEnabled(), false},
		{"PrometheusAddr", s.PrometheusAddr, ":9090"},
		{"PrometheusPath", s.PrometheusPath, "/metrics"},
		{"NearLimitRatio", s.NearLimitRatio, float32(0.8)},
		{"LimitHeader", s.LimitHeader, "RateLimit-Limit"},
		{"RemainingHeader", s.RemainingHeader, "RateLimit-Remaining"},
		{"ResetHeader", s.ResetHeader, "RateLimit-Reset"},
		{"RedisSocketType", s.RedisSocketType, "unix"},
		{"RedisType", s.RedisType, "single"},
		{"RedisURL", s.RedisURL, "/var/run/nutcracker/ratelimit.sock"},
		{"RedisURLSet", s.RedisURLSet(), false},
		{"RedisPoolSize", s.RedisPoolSize, 10},
		{"RedisPipelineWindow", s.RedisPipelineWindow, time.Duration(0)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestValuesAreParsedAsEnvconfigDoes(t *testing.T) {
	s, err := FromEnv([]string{
		"HOST=127.0.0.1", "PORT=0x1F90", "GRPC_UDS=/tmp/rl.sock", "LOG_LEVEL=debug", "LOG_FORMAT=JSON",
		"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=cfg",
		"RUNTIME_WATCH_ROOT=0", "RUNTIME_IGNOREDOTFILES=T", "USE_PROMETHEUS=true", "USE_STATSD=false",
		"NEAR_LIMIT_RATIO=0.5", "REDIS_TYPE=Cluster", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=a:1,b:2",
		"REDIS_PIPELINE_WINDOW=150us", "BACKEND_TYPE=", "CONFIG_TYPE=FILE", "GRPC_SERVER_USE_TLS=false",
		"REDIS_POOL_ON_EMPTY_BEHAVIOR=wait", "STATS_FLUSH_INTERVAL=1s", "HOST=::1",
	})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"HTTPAddr (a later entry wins, hex port)", s.HTTPAddr(), "[::1]:8080"},
		{"GRPCNetwork", s.GRPCNetwork(), "unix"},
		{"GRPCAddr", s.GRPCAddr(), "/tmp/rl.sock"},
		{"Level", s.Level(), slog.LevelDebug},
		{"JSONLogs", s.JSONLogs(), true},
		{"ConfigDir", s.ConfigDir(), "/data/ratelimit/cfg"},
		{"RuntimeWatchRoot", s.RuntimeWatchRoot, false},
		{"RuntimeIgnoreDotFiles", s.RuntimeIgnoreDotFiles, true},
		{"PrometheusEnabled", s.PrometheusEnabled(), true},
		{"NearLimitRatio", s.NearLimitRatio, float32(0.5)},
		{"RedisType", s.RedisType, "cluster"},
		{"RedisURLSet", s.RedisURLSet(), true},
		{"RedisPipelineWindow", s.RedisPipelineWindow, 150 * time.Microsecond},
		{"IsSet(STATS_FLUSH_INTERVAL)", s.IsSet("STATS_FLUSH_INTERVAL"), true},
		{"IsSet(DEBUG_PORT)", s.IsSet("DEBUG_PORT"), false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s, err := FromEnv([]string{"PROMETHEUS_ADDR=", "PROMETHEUS_PATH="}); err != nil || s.PrometheusAddr != ":9090" || s.PrometheusPath != "/metrics" {
		t.Errorf("empty PROMETHEUS_ADDR and PROMETHEUS_PATH: %q, %q, %v; want the defaults, as theirs", s.PrometheusAddr, s.PrometheusPath, err)
	}
	if s, err := FromEnv([]string{"USE_PROMETHEUS=true", "DISABLE_STATS=true"}); err != nil || s.PrometheusEnabled() {
		t.Errorf("DISABLE_STATS=true: PrometheusEnabled %v, %v; want false: it wins, as in theirs", s.PrometheusEnabled(), err)
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		env  string
		want string // in the error, after the variable's name
	}{
		{"BACKEND_TYPE=memcache", "memcache backend is not supported"},
		{"BACKEND_TYPE=Redis", "not one of"},
		{"CONFIG_TYPE=GRPC_XDS_SOTW", "xDS"},
		{"CONFIG_TYPE=file", "not one of"},
		{"USE_STATSD=true", "statsd is not supported"},
		{"USE_STATSD=1", "statsd is not supported"},
		{"USE_DOG_STATSD=true", "DogStatsD"},
		{"REDIS_PERSECOND=true", "per-second"},
		{"QUOTA_MODE=true", "quota mode"},
		{"TRACING_ENABLED=true", "tracing"},
		{"GRPC_SERVER_USE_TLS=maybe", "not a boolean"},
		{"LOCAL_CACHE_SIZE_IN_BYTES=1048576", "local over-limit cache"},
		{"LOCAL_CACHE_SIZE_IN_BYTES=-1", "local over-limit cache"},
		{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true", "not supported"},
		{"RESPONSE_DYNAMIC_METADATA=true", "dynamic metadata"},
		{"EXTRA_TAGS=env:prod", "extra tags"},
		{"PROMETHEUS_MAPPER_YAML=/etc/mapper.yaml", "mapping"},
		{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=true", "health check"},
		{"REDIS_POOL_ON_EMPTY_BEHAVIOR=create", "use WAIT"},
		// Malformed values, as envconfig (and so theirs) refuses them.
		{"USE_PROMETHEUS=yes", "not a boolean"},
		{"USE_PROMETHEUS=", "not a boolean"},
		{"PORT=http", "not a port"},
		{"GRPC_PORT=70000", "not a port"},
		{"REDIS_POOL_SIZE=ten", "not an integer"},
		{"REDIS_PIPELINE_WINDOW=150", "not a duration"},
		{"GRPC_MAX_CONNECTION_AGE=1day", "not a duration"},
		{"NEAR_LIMIT_RATIO=most", "not a number"},
		{"NEAR_LIMIT_RATIO=-0.5", "negative"},
		{"NEAR_LIMIT_RATIO=NaN", "not a number"},
		{"REDIS_TYPE=replicated", "not one of single, sentinel, cluster"},
		{"REDIS_SOCKET_TYPE=udp", "not one of tcp, unix"},
		{"LOG_LEVEL=loud", "not a log level"},
		{"PROMETHEUS_PATH=metrics", "not a path"},
		{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=sure", "not a boolean"},
		{"EXPIRATION_JITTER_MAX_SECONDS=soon", "not an integer"},
		{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS=a", "invalid map item"},
		// Added upstream after 3fb702589d36: refused when set to a value
		// that asks for what Sluice does not do.
		{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true", "milliseconds"},
		{"REDIS_STARTUP_INITIAL_INTERVAL=2s", "retrying the Redis connection at start"},
		{"REDIS_STARTUP_MAX_INTERVAL=1m", "retrying the Redis connection at start"},
		{"REDIS_STARTUP_MAX_ELAPSED_TIME=30s", "retrying the Redis connection at start"},
		{"REDIS_STARTUP_MAX_ELAPSED_TIME=soon", "not a duration"},
		{"REDIS_CLUSTER_PIPELINE_PARALLELISM=many", "not an integer"},
		{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=ms", "not a boolean"},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			_, err := FromEnv([]string{"USE_STATSD=false", c.env})
			name, _, _ := strings.Cut(c.env, "=")
			if err == nil {
				t.Fatalf("FromEnv accepted %s", c.env)
			}
			if !strings.HasPrefix(err.Error(), name+"=") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to start with %s= and say %q", err, name, c.want)
			}
		})
	}
}

func TestHarmlessValuesAreAccepted(t *testing.T) {
	for _, env := range []string{
		"USE_STATSD=false", "USE_DOG_STATSD=false", "QUOTA_MODE=false", "TRACING_ENABLED=0",
		"STATS_FLUSH_INTERVAL=1s", "STATSD_HOST=statsd", "EXPIRATION_JITTER_MAX_SECONDS=60",
		"REDIS_PIPELINE_LIMIT=8", "REDIS_TIMEOUT=2s", "MEMCACHE_HOST_PORT=a:1,b:2",
		"FORCE_START_WITHOUT_INITIAL_CONFIG=true", "REDIS_PERSECOND_URL=x:1", "LOCAL_CACHE_SIZE_IN_BYTES=0",
		"BACKEND_TYPE=redis", "EXTRA_TAGS=", "TRACING_SERVICE_NAME=rl", "GRPC_SERVER_TLS_CERT=/c.pem",
		// Added upstream after 3fb702589d36, at their defaults or tuning
		// only what Sluice does its own way.
		"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=false", "REDIS_STARTUP_INITIAL_INTERVAL=1000ms",
		"REDIS_STARTUP_MAX_INTERVAL=30s", "REDIS_STARTUP_MAX_ELAPSED_TIME=0", "REDIS_CLUSTER_PIPELINE_PARALLELISM=4",
		"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM=0",
	} {
		if _, err := FromEnv([]string{env}); err != nil {
			t.Errorf("%s: %v", env, err)
		}
	}
}

// TestDisableStatsWinsOverTheSinks: with DISABLE_STATS=true theirs sends
// no statistics whatever USE_STATSD, USE_DOG_STATSD and the Prometheus
// sink's variables say (runner.go: DisableStats is the first case), so
// they are accepted; a malformed value is still refused, as envconfig
// refuses it first.
func TestDisableStatsWinsOverTheSinks(t *testing.T) {
	for _, env := range []string{
		"USE_STATSD=true", "USE_DOG_STATSD=true", "EXTRA_TAGS=env:prod", "PROMETHEUS_MAPPER_YAML=/etc/mapper.yaml",
		"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true",
	} {
		s, err := FromEnv([]string{"DISABLE_STATS=true", env, "USE_PROMETHEUS=true"})
		if err != nil {
			t.Errorf("DISABLE_STATS=true %s: %v", env, err)
		} else if s.PrometheusEnabled() {
			t.Errorf("DISABLE_STATS=true %s: Prometheus enabled", env)
		}
		if _, err := FromEnv([]string{"DISABLE_STATS=false", env}); err == nil {
			t.Errorf("DISABLE_STATS=false %s: accepted", env)
		}
	}
	if _, err := FromEnv([]string{"DISABLE_STATS=true", "USE_STATSD=maybe"}); err == nil || !strings.Contains(err.Error(), "not a boolean") {
		t.Errorf("DISABLE_STATS=true USE_STATSD=maybe: %v, want it refused as malformed", err)
	}
}

// TestPipelineWindowIsLabelledIgnored: REDIS_PIPELINE_WINDOW is parsed
// and has no effect (go-redis has no write-flush window), and says so.
func TestPipelineWindowIsLabelledIgnored(t *testing.T) {
	for _, v := range Variables {
		if v.Name == "REDIS_PIPELINE_WINDOW" {
			if v.Supported != Ignored || !strings.Contains(v.Note, "go-redis") {
				t.Fatalf("REDIS_PIPELINE_WINDOW is %s (%q), want ignored with a note saying why", v.Supported, v.Note)
			}
			return
		}
	}
	t.Fatal("REDIS_PIPELINE_WINDOW is not listed")
}

func TestEveryErrorIsReported(t *testing.T) {
	_, err := FromEnv([]string{"USE_STATSD=true", "PORT=x", "BACKEND_TYPE=memcache"})
	for _, name := range []string{"USE_STATSD=", "PORT=", "BACKEND_TYPE="} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
}

func TestVariablesAreListedOnceWithTheirDecision(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Variables {
		if seen[v.Name] {
			t.Errorf("%s listed twice", v.Name)
		}
		seen[v.Name] = true
		switch v.Supported {
		case Honoured, Ignored:
		case Refused:
			if v.refuse == nil || v.Refuses == "" {
				t.Errorf("%s is Refused but refuses nothing", v.Name)
			}
		default:
			t.Errorf("%s: Supported %q", v.Name, v.Supported)
		}
		if v.Supported != Honoured && v.Note == "" {
			t.Errorf("%s is %s without a note saying why", v.Name, v.Supported)
		}
	}
	// The count of envconfig tags in envoyproxy/ratelimit's settings.go at
	// 3fb702589d36, and of those added after it up to 34d2b74.
	pinned, later := 0, 0
	for _, v := range Variables {
		if v.Upstream == "" {
			pinned++
		} else {
			later++
		}
	}
	if pinned != 108 || later != 6 {
		t.Errorf("%d variables of 3fb702589d36 and %d later ones, want 108 and 6", pinned, later)
	}
}
