package config

import "testing"

// TestDump: one line per rate_limit as envoyproxy/ratelimit's /rlconfig
// prints it, an unlimited rule with its unit UNKNOWN, a level without
// rate_limit absent, a nested rule by its full stat key.
func TestDump(t *testing.T) {
	c, err := Load([]File{{Path: "d.yaml", Data: []byte(`domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: internal
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: tenant
    descriptors:
      - key: route
        value: /orders
        quota_mode: true
        rate_limit: {unit: day, requests_per_unit: 0}
`)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `d.user: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false
d.internal: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false
d.shadow: unit=HOUR requests_per_unit=2, shadow_mode: true, quota_mode: false
d.tenant.route_/orders: unit=DAY requests_per_unit=0, shadow_mode: false, quota_mode: true
`
	if got := c.Dump(); got != want {
		t.Fatalf("Dump:\n%s\nwant:\n%s", got, want)
	}
}
