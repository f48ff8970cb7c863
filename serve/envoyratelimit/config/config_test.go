package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

func loadTestdata(t *testing.T, names ...string) *Config {
	t.Helper()
	var files []File
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, File{Path: n, Data: data})
	}
	c, err := Load(files, false)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// TestLoadRefuses holds envoyproxy/ratelimit's validation and its error
// messages, each naming the file.
func TestLoadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string // contents, named f0.yaml, f1.yaml...
		merge bool
		want  string // the whole message, or its start when it ends in "..."
	}{
		{"empty domain", []string{"descriptors: []"}, false, "f0.yaml: config file cannot have empty domain"},
		{"empty file", []string{""}, false, "f0.yaml: config file cannot have empty domain"},
		{"duplicate domain", []string{"domain: d", "domain: d"}, false, "f1.yaml: duplicate domain 'd' in config file"},
		{"empty key", []string{"domain: d\ndescriptors:\n  - value: v"}, false, "f0.yaml: descriptor has empty key"},
		{"duplicate key", []string{"domain: d\ndescriptors:\n  - {key: k, value: v}\n  - {key: k, value: v}"}, false,
			"f0.yaml: duplicate descriptor composite key 'd.k_v'"},
		{"duplicate nested key", []string{"domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - {key: k}\n      - {key: k}"}, false,
			"f0.yaml: duplicate descriptor composite key 'd.a.k'"},
		{"duplicate key across merged files", []string{"domain: d\ndescriptors:\n  - {key: k, value: v}", "domain: d\ndescriptors:\n  - {key: k, value: v}"}, true,
			"f1.yaml: duplicate descriptor composite key 'd.k_v'"},
		{"bad unit", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: foo, requests_per_unit: 1}"}, false,
			"f0.yaml: invalid rate limit unit 'foo'"},
		{"no unit", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}"}, false,
			"f0.yaml: invalid rate limit unit ''"},
		{"unit unknown", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: unknown, requests_per_unit: 1}"}, false,
			"f0.yaml: invalid rate limit unit 'unknown'"},
		{"unlimited with unit", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: day}"}, false,
			"f0.yaml: should not specify rate limit unit when unlimited"},
		{"replaces self", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: n, unit: day, replaces: [{name: n}]}"}, false,
			"f0.yaml: replaces should not contain name of same descriptor"},
		{"replaces empty", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: n, unit: day, replaces: [{name: ''}]}"}, false,
			"f0.yaml: should not have an empty replaces entry"},
		{"share_threshold without wildcard", []string{"domain: d\ndescriptors:\n  - {key: k, value: v, share_threshold: true}"}, false,
			"f0.yaml: share_threshold can only be used with wildcard values (ending with '*'), but found key 'k_v'"},
		{"unknown key", []string{"domain: d\ndescriptors:\n  - key: k\n    ratelimit: {unit: day}"}, false,
			"f0.yaml: config error, unknown key 'ratelimit'"},
		{"unknown nested key", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requestsperunit: 5}"}, false,
			"f0.yaml: config error, unknown key 'requestsperunit'"},
		{"non-string key", []string{"0.25: d"}, false, "f0.yaml: config error, key is not of type string: 0.25"},
		{"null key", []string{"~: d"}, false, "f0.yaml: config error, key is not of type string: <nil>"},
		{"hex key", []string{"0x10: d"}, false, "f0.yaml: config error, key is not of type string: 16"},
		{"list in a list", []string{"domain: d\ndescriptors:\n  - [a, 0x10]"}, false,
			"f0.yaml: config error, yaml file contains list of type other than map: [a 16]"},
		{"a scalar document", []string{"just words"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `just words` into map[interface {}]interface {}"},
		{"list of scalars", []string{"domain: d\ndescriptors:\n  - a\n  - b"}, false,
			"f0.yaml: config error, yaml file contains list of type other than map: a"},
		{"float leaf", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1.5}"}, false,
			"f0.yaml: error checking config"},
		{"bad yaml", []string{"domain: d\n  x: ["}, false, "f0.yaml: error loading config file: yaml: line 2..."},
		{"not a mapping", []string{"- domain: d"}, false, "f0.yaml: error loading config file: yaml: unmarshal errors:..."},
		{"wrong type", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: many}"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!str `many` into uint32"},
		{"negative", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: -1}"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!int `-1` into uint32"},
		{"above uint32", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 4294967296}"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!int `4294967296` into uint32"},
		{"descriptors not a list", []string{"domain: d\ndescriptors: many"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 2: cannot unmarshal !!str `many` into []config.YamlDescriptor"},
		{"bool not a bool", []string{"domain: d\ndescriptors:\n  - {key: k, shadow_mode: sometimes}"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 3: cannot unmarshal !!str `sometimes` into bool"},
		{"a long value shortened", []string{"domain: d\ndescriptors:\n  - {key: k, shadow_mode: sometimesnot}"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 3: cannot unmarshal !!str `sometim...` into bool"},
		// YAML merge keys: what they merge is checked as if written there.
		{"a merged unknown key", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {<<: {unit: day, bogus: 1}, requests_per_unit: 2}"}, false,
			"f0.yaml: config error, unknown key 'bogus'"},
		{"a merged anchor with an unknown key", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: &r {unit: day, bogus: 1}\n  - key: b\n    rate_limit: {<<: *r}"}, false,
			"f0.yaml: config error, unknown key 'bogus'"},
		{"a merged float", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {<<: {unit: day, requests_per_unit: 1.5}}"}, false,
			"f0.yaml: error checking config"},
		{"a merged scalar", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {<<: 5}"}, false,
			"f0.yaml: error loading config file: yaml: map merge requires map or sequence of maps as the value"},
		{"a merged list of a scalar", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {<<: [{unit: day}, 5]}"}, false,
			"f0.yaml: error loading config file: yaml: map merge requires map or sequence of maps as the value"},
		{"a quoted merge key", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {\"<<\": {unit: day}}"}, false,
			"f0.yaml: config error, unknown key '<<'"},
		// Scalars as yaml.v2 resolves them: a leading underscore is a
		// string, an explicit tag is honoured or refused.
		{"a leading underscore", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: _5}"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!str `_5` into uint32"},
		{"a float tag on an integer", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: !!float 5}"}, false,
			"f0.yaml: error checking config"},
		{"a float tag on a quoted integer", []string{"domain: d\ndescriptors:\n  - key: k\n    value: !!float \"1\""}, false,
			"f0.yaml: error checking config"},
		{"an int tag on a float", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: !!int 5.5}"}, false,
			"f0.yaml: error loading config file: yaml: cannot decode !!float `5.5` as a !!int"},
		{"a bool tag on an integer", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: !!bool 5}"}, false,
			"f0.yaml: error loading config file: yaml: cannot decode !!int `5` as a !!bool"},
		{"a custom tag", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: !custom 5}"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !custom `5` into uint32"},
		{"a timestamp", []string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 2001-12-14}"}, false,
			"f0.yaml: error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!timestamp `2001-12-14` into uint32"},
		{"a key beyond uint64", []string{"domain: d\n99999999999999999999: x"}, false,
			"f0.yaml: config error, key is not of type string: 1e+20"},
		{"a binary key", []string{"domain: d\n!!binary YQ==: x"}, false, "f0.yaml: config error, unknown key 'a'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files []File
			for i, c := range tc.files {
				files = append(files, File{Path: "f" + string(rune('0'+i)) + ".yaml", Data: []byte(c)})
			}
			c, err := Load(files, tc.merge)
			if err == nil {
				t.Fatalf("loaded (%d domains), want %q", c.Domains(), tc.want)
			}
			if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
				if !strings.HasPrefix(err.Error(), prefix) {
					t.Fatalf("error %q, want it to start with %q", err, prefix)
				}
			} else if err.Error() != tc.want {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

// TestLoadAccepts holds what their YAML 1.1 reader accepts: yes/on
// booleans, numbers where strings are wanted, any case of a unit, keys of
// the schema at any depth, a domain split over files when merging, merge
// keys as yaml.v2 applies them (a merge key's value first, the keys after
// it over it, a list's first mapping over the next, a rate_limit set
// over a merged one field by field), and numbers and tags as yaml.v2
// reads them.
func TestLoadAccepts(t *testing.T) {
	files := []File{
		{Path: "a.yaml", Data: []byte("domain: d\nunit: ignored\ndescriptors:\n  - key: 42\n    value: 7\n    shadow_mode: yes\n    rate_limit: {unit: SeCoNd, requests_per_unit: 0x10}")},
		{Path: "b.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: other\n    rate_limit: {unlimited: true}")},
	}
	if _, err := Load(files, false); err == nil || err.Error() != "b.yaml: duplicate domain 'd' in config file" {
		t.Fatalf("without merging: %v", err)
	}
	c, err := Load(files, true)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Limit("d", desc("42", "7"))
	if l == nil || !l.ShadowMode || l.RequestsPerUnit != 16 || l.Unit != rlsv3.RateLimitResponse_RateLimit_SECOND {
		t.Fatalf("limit %+v, want 16 per SECOND in shadow mode", l)
	}
	if l := c.Limit("d", desc("other", "x")); l == nil || !l.Unlimited {
		t.Fatalf("merged file's rule: %+v, want unlimited", l)
	}

	merges := File{Path: "m.yaml", Data: []byte(`domain: m
descriptors:
  - key: base
    rate_limit: &r {unit: second, requests_per_unit: 5}
  - key: more
    rate_limit: {<<: *r, requests_per_unit: 9}
  - &t {key: tmpl, value: a, rate_limit: {unit: minute, requests_per_unit: 4}}
  - {<<: *t, value: b, rate_limit: {requests_per_unit: 7}}
  - key: list
    rate_limit: {<<: [{unit: hour}, {unit: day, requests_per_unit: 3}]}
  - key: tagged
    rate_limit: {!!merge <<: *r}
  - key: overridden
    rate_limit: {<<: {unit: second, requests_per_unit: 1.5}, requests_per_unit: 2}
  - key: numbers
    descriptors:
      - {key: underscores, rate_limit: {unit: second, requests_per_unit: 1_0}}
      - {key: plus, rate_limit: {unit: second, requests_per_unit: +6}}
      - {key: octal, rate_limit: {unit: second, requests_per_unit: 0o17}}
      - {key: tagged, rate_limit: {unit: second, requests_per_unit: !!int "8"}}
      - {key: !!binary Ymlu, rate_limit: {unit: second, requests_per_unit: 2}}
`)}
	c, err = Load([]File{merges}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		desc *ratelimitv3.RateLimitDescriptor
		n    uint32
		unit rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{desc("base", "x"), 5, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{desc("more", "x"), 9, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{desc("tmpl", "a"), 4, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{desc("tmpl", "b"), 7, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{desc("list", "x"), 3, rlsv3.RateLimitResponse_RateLimit_HOUR},
		{desc("tagged", "x"), 5, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{desc("overridden", "x"), 2, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{desc("numbers", "x", "underscores", "x"), 10, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{desc("numbers", "x", "plus", "x"), 6, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{desc("numbers", "x", "octal", "x"), 15, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{desc("numbers", "x", "tagged", "x"), 8, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{desc("numbers", "x", "bin", "x"), 2, rlsv3.RateLimitResponse_RateLimit_SECOND},
	} {
		l := c.Limit("m", w.desc)
		if l == nil || l.RequestsPerUnit != w.n || l.Unit != w.unit {
			t.Errorf("%v: %+v, want %d per %s", w.desc, l, w.n, w.unit)
		}
	}
}

// TestLoadRefusesWhatTheirsTakesQuietly holds Sluice's deliberate
// refusals, in files envoyproxy/ratelimit loads: a key given twice in one
// mapping (theirs decodes both into one field, a rate_limit's fields
// merged, and validates only the last), named with its lines; and a merge
// key after a key it also sets (yaml.v2 lets the merged value win, YAML's
// merge keys the key).
func TestLoadRefusesWhatTheirsTakesQuietly(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"a rate_limit twice", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n    rate_limit: {requests_per_unit: 7}",
			"f.yaml: config error, key 'rate_limit' given twice in one mapping, at lines 4 and 5"},
		{"the first of two with an unknown key", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, bogus: 1}\n    rate_limit: {unit: second}",
			"f.yaml: config error, key 'rate_limit' given twice in one mapping, at lines 4 and 5"},
		{"domain twice", "domain: x\ndomain: d", "f.yaml: config error, key 'domain' given twice in one mapping, at lines 1 and 2"},
		{"a key twice in a merged mapping", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {<<: {unit: second, unit: day}}",
			"f.yaml: config error, key 'unit' given twice in one mapping, at lines 4 and 4"},
		{"a merge after a key it sets", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &r {unit: second, requests_per_unit: 5}\n  - key: b\n    rate_limit: {requests_per_unit: 9, <<: *r}",
			"f.yaml: config error, the merge key '<<' at line 6 sets key 'requests_per_unit' given before it, at line 6, which envoyproxy/ratelimit replaces with the merged value: put '<<' first"},
		{"two merge keys", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      <<: {unit: second}\n      <<: {requests_per_unit: 4}",
			"f.yaml: config error, key '<<' given twice in one mapping, at lines 5 and 6: merge a list instead, as <<: [*a, *b]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load([]File{{Path: "f.yaml", Data: []byte(tc.file)}}, false)
			if err == nil {
				t.Fatalf("loaded (%d domains), want %q", c.Domains(), tc.want)
			}
			if err.Error() != tc.want {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

func TestPeriods(t *testing.T) {
	const day = 86400
	for unit, seconds := range map[rlsv3.RateLimitResponse_RateLimit_Unit]int64{
		rlsv3.RateLimitResponse_RateLimit_SECOND: 1, rlsv3.RateLimitResponse_RateLimit_MINUTE: 60,
		rlsv3.RateLimitResponse_RateLimit_HOUR: 3600, rlsv3.RateLimitResponse_RateLimit_DAY: day,
		rlsv3.RateLimitResponse_RateLimit_WEEK: 7 * day, rlsv3.RateLimitResponse_RateLimit_MONTH: 30 * day,
		rlsv3.RateLimitResponse_RateLimit_YEAR: 365 * day, rlsv3.RateLimitResponse_RateLimit_UNKNOWN: 0,
	} {
		if got := int64(Period(unit).Seconds()); got != seconds {
			t.Errorf("%s: %d s, want %d", unit, got, seconds)
		}
	}
}
