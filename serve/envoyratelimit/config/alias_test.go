package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestLoadRefusesExcessiveAliasing: a file of nested aliases that would
// expand to 10^9 nodes (a "billion laughs") is refused at once, as
// yaml.v2 refuses it for envoyproxy/ratelimit, instead of taking hours;
// aliases within the bound load, and so does a file of over a million
// nodes written out.
func TestLoadRefusesExcessiveAliasing(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: laughs\ndescriptors:\n")
	for i := range 10 {
		fmt.Fprintf(&b, "  - key: k%d\n    descriptors: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			if i == 0 {
				b.WriteString("{key: a}")
			} else {
				fmt.Fprintf(&b, "{key: a, descriptors: *l%d}", i-1)
			}
		}
		b.WriteString("]\n")
	}
	_, err := Load([]File{{Path: "laughs.yaml", Data: []byte(b.String())}}, false)
	if err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Fatalf("error %v, want excessive aliasing", err)
	}

	// A large file with no alias loads: 100,000 descriptors, over a
	// million nodes, none of them through an alias.
	var big strings.Builder
	big.WriteString("domain: big\ndescriptors:\n")
	for i := range 100_000 {
		fmt.Fprintf(&big, "  - {key: tenant, value: t%d, rate_limit: {unit: second, requests_per_unit: 5}}\n", i)
	}
	if c, err := Load([]File{{Path: "big.yaml", Data: []byte(big.String())}}, false); err != nil || len(c.Rules()) != 100_000 {
		t.Fatalf("a file of 100,000 descriptors and no alias: %v", err)
	}

	ok := "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &r {unit: second, requests_per_unit: 2}\n  - key: b\n    rate_limit: *r\n"
	c, err := Load([]File{{Path: "ok.yaml", Data: []byte(ok)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Rules()); n != 2 {
		t.Fatalf("%d rules, want 2", n)
	}
}
