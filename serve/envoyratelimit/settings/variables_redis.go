package settings

import (
	"strings"
	"time"
)

const perSecondOnly = "used only with REDIS_PERSECOND=true"

var redisVariables = []Variable{
	{Name: "REDIS_SOCKET_TYPE", Default: "unix", Supported: Honoured, Note: "tcp or unix",
		parse: oneOf(func(s *Settings) *string { return &s.RedisSocketType }, false, "tcp", "unix")},
	{Name: "REDIS_TYPE", Default: "SINGLE", Supported: Honoured, Note: "single, sentinel or cluster, any case",
		parse: oneOf(func(s *Settings) *string { return &s.RedisType }, true, "single", "sentinel", "cluster")},
	{Name: "REDIS_URL", Default: "/var/run/nutcracker/ratelimit.sock", Supported: Honoured,
		Note:  "unset: Sluice's embedded store, limits not shared between processes (theirs dials its default socket)",
		parse: str(func(s *Settings) *string { return &s.RedisURL })},
	{Name: "REDIS_POOL_SIZE", Default: "10", Supported: Honoured,
		parse: integer(intBits, func(s *Settings) *int { return &s.RedisPoolSize })},
	{Name: "REDIS_AUTH", Supported: Honoured, Note: "password, or user:password",
		parse: str(func(s *Settings) *string { return &s.RedisAuth })},
	{Name: "REDIS_TLS", Default: "false", Supported: Honoured, Note: "TLS with the system's roots",
		parse: boolean(func(s *Settings) *bool { return &s.RedisTLS })},
	{Name: "REDIS_TLS_CLIENT_CERT", Supported: Honoured, Note: "with REDIS_TLS_CLIENT_KEY: the client's certificate (both or neither are used, as in theirs)",
		parse: str(func(s *Settings) *string { return &s.RedisTLSClientCert })},
	{Name: "REDIS_TLS_CLIENT_KEY", Supported: Honoured,
		parse: str(func(s *Settings) *string { return &s.RedisTLSClientKey })},
	{Name: "REDIS_TLS_CACERT", Supported: Honoured, Note: "added to the system's roots",
		parse: str(func(s *Settings) *string { return &s.RedisTLSCACert })},
	{Name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", Default: "false", Supported: Honoured,
		Note:  "the chain is verified, the name is not",
		parse: boolean(func(s *Settings) *bool { return &s.RedisTLSSkipHostnameVerification })},
	{Name: "REDIS_PIPELINE_WINDOW", Default: "0", Supported: Ignored,
		Note:  "a negative one refused; otherwise no effect: theirs sets it as radix's write-flush interval on a Cluster, batching the writes of concurrent commands, and go-redis has no write-flush window (one command at a time per connection); Sluice batches concurrent decisions itself, with a policy's coalesce",
		parse: duration(func(s *Settings) *time.Duration { return &s.RedisPipelineWindow })},
	{Name: "REDIS_PIPELINE_LIMIT", Default: "0", Supported: Ignored, Note: "deprecated, with no effect in theirs either",
		parse: integer(intBits, nil)},
	{Name: "REDIS_CLUSTER_PIPELINE_PARALLELISM", Default: "1", Supported: Ignored, Upstream: "34d2b74",
		Note:  "how many of one call's per-key groups theirs sends at once on a Cluster: speed only; Sluice's Cluster client sends each decision on its own, concurrently",
		parse: integer(intBits, nil)},
	{Name: "REDIS_PERSECOND", Default: "false", Supported: Refused, Refuses: "true",
		Note:  "a second Redis for the per-second limits is not supported",
		parse: boolean(nil), refuse: refuseTrue("a second Redis for the per-second limits is not supported")},
	{Name: "REDIS_PERSECOND_SOCKET_TYPE", Default: "unix", Supported: Ignored, Note: perSecondOnly},
	{Name: "REDIS_PERSECOND_TYPE", Default: "SINGLE", Supported: Ignored, Note: perSecondOnly},
	{Name: "REDIS_PERSECOND_URL", Default: "/var/run/nutcracker/ratelimitpersecond.sock", Supported: Ignored, Note: perSecondOnly},
	{Name: "REDIS_PERSECOND_POOL_SIZE", Default: "10", Supported: Ignored, Note: perSecondOnly, parse: integer(intBits, nil)},
	{Name: "REDIS_PERSECOND_AUTH", Supported: Ignored, Note: perSecondOnly},
	{Name: "REDIS_PERSECOND_TLS", Default: "false", Supported: Ignored, Note: perSecondOnly, parse: boolean(nil)},
	{Name: "REDIS_SENTINEL_AUTH", Supported: Honoured, Note: "the sentinels' password (REDIS_AUTH is the master's)",
		parse: str(func(s *Settings) *string { return &s.RedisSentinelAuth })},
	{Name: "REDIS_PERSECOND_SENTINEL_AUTH", Supported: Ignored, Note: perSecondOnly},
	{Name: "REDIS_PERSECOND_PIPELINE_WINDOW", Default: "0", Supported: Ignored, Note: perSecondOnly, parse: duration(nil)},
	{Name: "REDIS_PERSECOND_PIPELINE_LIMIT", Default: "0", Supported: Ignored, Note: perSecondOnly, parse: integer(intBits, nil)},
	{Name: "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", Default: "1", Supported: Ignored, Upstream: "34d2b74", Note: perSecondOnly,
		parse: integer(intBits, nil)},
	{Name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", Default: "false", Supported: Refused, Refuses: "true",
		Note:  "failing the health check without a Redis connection is not supported",
		parse: boolean(nil), refuse: refuseTrue("failing the health check without a Redis connection is not supported")},
	{Name: "REDIS_TIMEOUT", Default: "10s", Supported: Ignored, Note: "Sluice's Redis clients keep their own dial, read and write timeouts",
		parse: duration(nil)},
	{Name: "REDIS_PERSECOND_TIMEOUT", Default: "10s", Supported: Ignored, Note: perSecondOnly, parse: duration(nil)},
	{Name: "REDIS_POOL_ON_EMPTY_BEHAVIOR", Default: "WAIT", Supported: Ignored, Refuses: "CREATE, ERROR (any case)",
		Note:   "Sluice's pool waits for a connection, as WAIT; CREATE and ERROR stop theirs at start too",
		refuse: refusePoolBehaviour},
	{Name: "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", Default: "WAIT", Supported: Ignored, Note: perSecondOnly},
	startupRetry("REDIS_STARTUP_INITIAL_INTERVAL", "1s"),
	startupRetry("REDIS_STARTUP_MAX_INTERVAL", "30s"),
	startupRetry("REDIS_STARTUP_MAX_ELAPSED_TIME", "0"),
	{Name: "MEMCACHE_HOST_PORT", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache"},
	{Name: "MEMCACHE_MAX_IDLE_CONNS", Default: "2", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache", parse: integer(intBits, nil)},
	{Name: "MEMCACHE_SRV", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache"},
	{Name: "MEMCACHE_SRV_REFRESH", Default: "0", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache", parse: duration(nil)},
	{Name: "MEMCACHE_TLS", Default: "false", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache", parse: boolean(nil)},
	{Name: "MEMCACHE_TLS_CLIENT_CERT", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache"},
	{Name: "MEMCACHE_TLS_CLIENT_KEY", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache"},
	{Name: "MEMCACHE_TLS_CACERT", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache"},
	{Name: "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", Default: "false", Supported: Ignored, Note: "used only with BACKEND_TYPE=memcache", parse: boolean(nil)},
}

var lastVariables = []Variable{
	{Name: "SHADOW_MODE", Default: "false", Supported: Honoured,
		parse: boolean(func(s *Settings) *bool { return &s.ShadowMode })},
	{Name: "QUOTA_MODE", Default: "false", Supported: Refused, Refuses: "true",
		Note:  "quota mode is not supported",
		parse: boolean(nil), refuse: refuseTrue("quota mode is not supported")},
	{Name: "RESPONSE_DYNAMIC_METADATA", Default: "false", Supported: Refused, Refuses: "true",
		Note:  "dynamic metadata in the responses is not supported",
		parse: boolean(nil), refuse: refuseTrue("dynamic metadata in the responses is not supported")},
	{Name: "MERGE_DOMAIN_CONFIG", Default: "false", Supported: Honoured,
		parse: boolean(func(s *Settings) *bool { return &s.MergeDomainConfig })},
	{Name: "TRACING_ENABLED", Default: "false", Supported: Refused, Refuses: "true",
		Note:  "OTLP tracing of the service is not supported",
		parse: boolean(nil), refuse: refuseTrue("OTLP tracing is not supported")},
	{Name: "TRACING_SERVICE_NAME", Default: "RateLimit", Supported: Ignored, Note: "used only with TRACING_ENABLED=true"},
	{Name: "TRACING_SERVICE_NAMESPACE", Supported: Ignored, Note: "used only with TRACING_ENABLED=true"},
	{Name: "TRACING_SERVICE_INSTANCE_ID", Supported: Ignored, Note: "used only with TRACING_ENABLED=true"},
	{Name: "TRACING_EXPORTER_PROTOCOL", Default: "http", Supported: Ignored, Note: "used only with TRACING_ENABLED=true"},
	{Name: "TRACING_SAMPLING_RATE", Default: "1", Supported: Ignored, Note: "used only with TRACING_ENABLED=true", parse: float(64)},
}

// startupRetry is one of the variables (envoyproxy/ratelimit b8d893f) by
// which theirs retries the Redis connection at start, with a backoff,
// instead of exiting. sluice-serve exits 1 when Redis does not answer at
// start, as theirs did at 3fb702589d36, for its supervisor to restart it:
// their default is accepted (unset, it is that of 3fb702589d36 here),
// another value refused.
func startupRetry(name, def string) Variable {
	want, err := time.ParseDuration(def)
	if err != nil {
		panic(err)
	}
	return Variable{Name: name, Default: def, Supported: Refused, Refuses: "any duration but " + def, Upstream: "b8d893f",
		Note:  "retrying the Redis connection at start is not supported: sluice-serve exits 1 when Redis does not answer at start, as theirs did at 3fb702589d36",
		parse: duration(nil),
		refuse: func(v string) string {
			if d, err := time.ParseDuration(v); err == nil && d != want {
				return "retrying the Redis connection at start is not supported: sluice-serve exits 1 when Redis does not answer at start (set " + def + " or unset it)"
			}
			return ""
		}}
}

func refusePoolBehaviour(v string) string {
	switch strings.ToUpper(v) {
	case "CREATE", "ERROR":
		return "not supported (nor by envoyproxy/ratelimit, which stops at start); use WAIT"
	}
	return ""
}
