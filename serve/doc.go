// Package serve is sluice serve: the limiter as a service, for Envoy (and
// Istio, Contour: anything that speaks Envoy's rate-limit service) and for
// callers in any language.
//
// A [Server] decides by the policies of one YAML file ([Config]): each
// matches a descriptor (a list of entries such as user_id, or path=/orders)
// and chooses an algorithm, a limit, a cost per hit and decorators (lease,
// shard, coalesce, fallback). It serves Envoy's
// envoy.service.ratelimit.v3.RateLimitService over gRPC, and POST
// /v1/allow, /healthz, /readyz and /metrics (Prometheus, through
// OpenTelemetry) over HTTP. Servers sharing one Redis share one limit.
//
// The command is serve/cmd/sluice-serve; docs/serve.md shows an Envoy
// configuration.
package serve
