package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestLoadRefusesExcessiveAliasing: a file of nested aliases that would
// expand to 10^9 nodes (a "billion laughs") is refused at once, as
// yaml.v2 refuses it for envoyproxy/ratelimit, instead of taking hours;
// aliases within the bound still load.
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

	ok := "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &r {unit: second, requests_per_unit: 2}\n  - key: b\n    rate_limit: *r\n"
	c, err := Load([]File{{Path: "ok.yaml", Data: []byte(ok)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Rules()); n != 2 {
		t.Fatalf("%d rules, want 2", n)
	}
}
