package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

const (
	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	day    = rlsv3.RateLimitResponse_RateLimit_DAY
	week   = rlsv3.RateLimitResponse_RateLimit_WEEK
	month  = rlsv3.RateLimitResponse_RateLimit_MONTH
)

type want struct {
	fullKey string
	perUnit uint32
	unit    rlsv3.RateLimitResponse_RateLimit_Unit
}

func checkLimit(t *testing.T, c *Config, domain string, d *ratelimitv3.RateLimitDescriptor, w *want) *Limit {
	t.Helper()
	l := c.Limit(domain, d)
	switch {
	case w == nil && l != nil:
		t.Fatalf("limit %s %d per %s, want none", l.FullKey, l.RequestsPerUnit, l.Unit)
	case w == nil:
	case l == nil:
		t.Fatalf("no limit, want %s", w.fullKey)
	case l.FullKey != w.fullKey || l.RequestsPerUnit != w.perUnit || l.Unit != w.unit:
		t.Fatalf("limit %s %d per %s, want %s %d per %s", l.FullKey, l.RequestsPerUnit, l.Unit, w.fullKey, w.perUnit, w.unit)
	case l.Current.GetRequestsPerUnit() != w.perUnit || l.Current.GetUnit() != w.unit || l.Current.GetName() != l.Name:
		t.Fatalf("current_limit %v, want the configured %d per %s named %q", l.Current, w.perUnit, w.unit, l.Name)
	}
	return l
}

// TestMatching holds GetLimit's lookup on a file of every kind of level:
// key_value first, then the bare key; a limit only at the descriptor's
// full depth; a level without rate_limit limits nothing; no backtracking.
func TestMatching(t *testing.T) {
	c := loadTestdata(t, "basic.yaml")
	for _, tc := range []struct {
		name string
		d    *ratelimitv3.RateLimitDescriptor
		want *want
	}{
		{"bare key under a value", desc("tenant", "acme", "route", "search"), &want{"shop.tenant_acme.route", 5, second}},
		{"value under a value", desc("tenant", "acme", "route", "checkout"), &want{"shop.tenant_acme.route_checkout", 10, second}},
		{"a level without rate_limit", desc("tenant", "acme"), nil},
		{"another tenant", desc("tenant", "globex", "route", "search"), nil},
		{"bare key", desc("client", "anyone"), &want{"shop.client", 20, minute}},
		{"value beside the bare key", desc("client", "partner"), &want{"shop.client_partner", 30, minute}},
		{"allow-listed value", desc("client", "internal"), nil},
		{"deeper than the rule", desc("ip", "1.2.3.4", "route", "x"), nil},
		{"named rule", desc("user", "u1"), &want{"shop.user", 1, day}},
		{"outer rule of a nested pair", desc("region", "eu"), &want{"shop.region_eu", 15, day}},
		{"inner rule", desc("region", "eu", "zone", "eu-1"), &want{"shop.region_eu.zone_eu-1", 25, week}},
		{"no inner match, no outer fallback", desc("region", "eu", "zone", "eu-2"), nil},
		{"detailed_metric", desc("path", "/a"), &want{"shop.path_/a", 70, month}},
		{"unknown key", desc("nothing", "x"), nil},
		{"no entries", desc(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) { checkLimit(t, c, "shop", tc.d, tc.want) })
	}
	if l := c.Limit("elsewhere", desc("client", "x")); l != nil {
		t.Fatalf("unknown domain: %+v, want no limit", l)
	}
	if l := c.Limit("shop", desc("health", "x")); l == nil || !l.Unlimited {
		t.Fatalf("unlimited rule: %+v", l)
	}
	if l := c.Limit("shop", desc("user", "u1")); l.Name != "per_user" || l.Current.GetName() != "per_user" {
		t.Fatalf("named rule: name %q, current_limit %v", l.Name, l.Current)
	}
	if l := c.Limit("shop", desc("year", "2026")); !l.ShadowMode || !l.QuotaMode || l.RequestsPerUnit != 0 || l.Period == 0 {
		t.Fatalf("shadow and quota mode with a limit of 0 per YEAR: %+v", l)
	}
}

// TestWildcards: trailing '*' values match by prefix, in file order,
// after an exact value and before the bare key; a '*' inside a value is
// literal; an exact match that leads nowhere does not backtrack to a
// wildcard.
func TestWildcards(t *testing.T) {
	c := loadTestdata(t, "wildcard.yaml")
	for _, tc := range []struct {
		name string
		d    *ratelimitv3.RateLimitDescriptor
		want *want
	}{
		{"first wildcard", desc("bucket", "logs-2026"), &want{"files.bucket_logs*", 20, minute}},
		{"the prefix itself", desc("bucket", "logs"), &want{"files.bucket_logs*", 20, minute}},
		{"second wildcard", desc("bucket", "login"), &want{"files.bucket_log*", 21, minute}},
		{"no prefix", desc("bucket", "lo"), nil},
		{"literal star", desc("bucket", "a*b"), &want{"files.bucket_a*b", 22, minute}},
		{"a star inside is no wildcard", desc("bucket", "aXb"), nil},
		{"nested wildcard", desc("owner", "team", "bucket", "tmp-1"), &want{"files.owner_team.bucket_tmp*", 23, minute}},
		{"no backtracking", desc("owner", "team", "object", "o"), nil},
		{"wildcard level", desc("owner", "tea", "object", "o"), &want{"files.owner_te*.object", 24, minute}},
		{"key wildcard", desc("prefixed", "v"), &want{"files.prefixed_prefix*", 25, minute}},
		{"share_threshold", desc("shared", "up/a"), &want{"files.shared_up/*", 100, minute}},
		{"exact beats share_threshold", desc("shared", "up/exact"), &want{"files.shared_up/exact", 50, minute}},
		{"share_threshold with detailed_metric", desc("svc", "svc/a", "endpoint", "e1"), &want{"files.svc_svc/*.endpoint_e1", 80, minute}},
		{"value_to_metric on a wildcard", desc("route", "api/v1", "method", "GET"), &want{"files.route_api/v1.method", 60, minute}},
		{"value_to_metric on a bare key", desc("verb", "GET"), &want{"files.verb_GET", 61, minute}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkLimit(t, c, "files", tc.d, tc.want) })
	}

	a, b := c.Limit("files", desc("shared", "up/a")), c.Limit("files", desc("shared", "up/b"))
	if a.ID != b.ID || a.Tag != b.Tag {
		t.Fatalf("share_threshold: up/a and up/b count apart (%s, %s)", a.ID, b.ID)
	}
	if e := c.Limit("files", desc("shared", "up/exact")); e.ID == a.ID {
		t.Fatal("the exact value shares the wildcard's counter")
	}
	x, y := c.Limit("files", desc("svc", "svc/a", "endpoint", "e1")), c.Limit("files", desc("svc", "svc/b", "endpoint", "e1"))
	if x.ID != y.ID {
		t.Fatal("share_threshold above a nested rule: two values count apart")
	}
	if l1, l2 := c.Limit("files", desc("bucket", "logs-1")), c.Limit("files", desc("bucket", "logs-2")); l1.ID == l2.ID {
		t.Fatal("a wildcard without share_threshold: two values share a counter")
	}
	if r := c.Limit("files", desc("route", "api/v1", "method", "GET")).Rule; r != "files.route_api/*.method" {
		t.Fatalf("Rule %q, want the configured stat key", r)
	}
}

// TestOverride: a descriptor's own limit applies to any descriptor of a
// known domain, with the stat key of every entry, no name and no shadow
// mode, and the same counter whatever it says.
func TestOverride(t *testing.T) {
	c := loadTestdata(t, "basic.yaml")
	with := func(d *ratelimitv3.RateLimitDescriptor, n uint32, u typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: u}
		return d
	}
	if l := c.Limit("elsewhere", with(desc("a", "b"), 10, typev3.RateLimitUnit_DAY)); l != nil {
		t.Fatalf("unknown domain: %+v", l)
	}
	l1 := checkLimit(t, c, "shop", with(desc("tenant", "acme", "route", "x"), 10, typev3.RateLimitUnit_DAY), &want{"shop.tenant_acme.route_x", 10, day})
	l2 := checkLimit(t, c, "shop", with(desc("tenant", "acme", "route", "x"), 42, typev3.RateLimitUnit_HOUR), &want{"shop.tenant_acme.route_x", 42, hour})
	if !l1.Override || l1.ID != l2.ID || l1.Tag != l2.Tag {
		t.Fatalf("a changed override changed the counter: %q, %q", l1.ID, l2.ID)
	}
	if plain := c.Limit("shop", desc("tenant", "acme", "route", "x")); plain.ID != l1.ID {
		t.Fatalf("the override counts apart from the rule: %q, %q", plain.ID, l1.ID)
	}
	l3 := checkLimit(t, c, "shop", with(desc("tenant", "acme", "route", "y"), 42, typev3.RateLimitUnit_HOUR), &want{"shop.tenant_acme.route_y", 42, hour})
	if l3.ID == l1.ID {
		t.Fatal("another value shares the counter")
	}
	checkLimit(t, c, "shop", with(desc("nothing", "", "more", "x"), 1, typev3.RateLimitUnit_SECOND), &want{"shop.nothing.more_x", 1, second})
	if l := c.Limit("shop", with(desc("year", "1"), 5, typev3.RateLimitUnit_MINUTE)); l.ShadowMode || l.Name != "" || l.Rule != "" {
		t.Fatalf("an override keeps the rule's shadow mode or name: %+v", l)
	}
	if l := c.Limit("shop", with(desc("a", "b"), 5, typev3.RateLimitUnit_UNKNOWN)); l.Period != 0 {
		t.Fatalf("unknown unit: period %s", l.Period)
	}
}

// TestReadDir walks as goruntime does: every file under the directory,
// subdirectories included, whatever its name; links to files read, links
// to directories and dangling ones skipped; dot files and directories
// skipped only when asked.
func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "b")
	write("a.txt", "a")
	write("sub/c.yml", "c")
	write(".hidden", "h")
	write("..2026_01_01/d.yaml", "d")
	for link, target := range map[string]string{"e.yaml": "..2026_01_01/d.yaml", "..data": "..2026_01_01", "gone.yaml": "nowhere"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	names := func(ignore bool) []string {
		files, err := ReadDir(dir, ignore)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range files {
			rel, _ := filepath.Rel(dir, f.Path)
			out = append(out, filepath.ToSlash(rel)+"="+string(f.Data))
		}
		return out
	}
	if got, want := names(false), []string{"..2026_01_01/d.yaml=d", ".hidden=h", "a.txt=a", "b.yaml=b", "e.yaml=d", "sub/c.yml=c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("every file: %q, want %q", got, want)
	}
	if got, want := names(true), []string{"a.txt=a", "b.yaml=b", "e.yaml=d", "sub/c.yml=c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ignoring dot files: %q, want %q", got, want)
	}
	if _, err := ReadDir(filepath.Join(dir, "missing"), false); err == nil {
		t.Fatal("a missing directory read")
	}
}
