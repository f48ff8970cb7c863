package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/replay"
)

// keyPolicies says how the log keys each policy, as its file keys it: a
// policy keyed by client address (the default) by the logged client
// address; one keyed by a header by the log field that holds it, --key
// FIELD when one header keys the policies, --key-of HEADER=FIELD for each
// header when several do. It sets each policy's KeyIndex and returns the
// reader's keys, one per way the policies are keyed, in the order of the
// first policy keyed so ("client" for the client address).
func keyPolicies(policies []replay.Policy, key string, keySet bool, keyOf map[string]string) ([]string, error) {
	var headers []string // the headers that key policies, in order
	for _, p := range policies {
		if h, ok := strings.CutPrefix(p.KeyedBy, "header:"); ok && !slices.Contains(headers, http.CanonicalHeaderKey(h)) {
			headers = append(headers, http.CanonicalHeaderKey(h))
		}
	}
	for h := range keyOf {
		if !slices.Contains(headers, h) {
			return nil, fmt.Errorf("--key-of %s: no policy keys by header:%s", h, h)
		}
	}
	if keySet && key != "client" {
		switch {
		case len(headers) == 0 && len(policies) > 0:
			return nil, fmt.Errorf("policy %q keys by client address, but --key %s keys by a logged field: leave --key out", policies[0].Name, key)
		case len(headers) == 1 && keyOf[headers[0]] != "":
			return nil, fmt.Errorf("--key %s and --key-of %s=%s: give one", key, headers[0], keyOf[headers[0]])
		case len(headers) > 1:
			return nil, fmt.Errorf("--key %s: several headers key the policies (%s): give --key-of HEADER=FIELD for each", key, strings.Join(headers, ", "))
		}
	}
	fieldOf := func(header, policy string) (string, error) {
		if f, ok := keyOf[header]; ok {
			return f, nil
		}
		if len(headers) == 1 && keySet && key != "client" {
			return key, nil
		}
		if len(headers) == 1 {
			return "", fmt.Errorf("policy %q keys by header:%s: give --key with the log field that holds it", policy, header)
		}
		return "", fmt.Errorf("policy %q keys by header:%s, and other policies by other headers: give --key-of %s=FIELD, the log field that holds it, for each", policy, header, header)
	}
	var keys []string
	for i := range policies {
		p := &policies[i]
		source := "client"
		if h, ok := strings.CutPrefix(p.KeyedBy, "header:"); ok {
			f, err := fieldOf(http.CanonicalHeaderKey(h), p.Name)
			if err != nil {
				return nil, err
			}
			source = f
		}
		p.KeyIndex = slices.Index(keys, source)
		if p.KeyIndex < 0 {
			p.KeyIndex, keys = len(keys), append(keys, source)
		}
	}
	return keys, nil
}

// keyOfFlag collects --key-of HEADER=FIELD, the headers canonical.
type keyOfFlag map[string]string

func (k keyOfFlag) String() string { return "" }

func (k keyOfFlag) Set(v string) error {
	h, f, ok := strings.Cut(v, "=")
	h, f = strings.TrimSpace(h), strings.TrimSpace(f)
	if !ok || h == "" || f == "" {
		return fmt.Errorf("%q: want HEADER=FIELD, such as X-Tenant=tenant", v)
	}
	if f == "client" {
		return fmt.Errorf("%q: client is the client address, which keys no header", v)
	}
	h = http.CanonicalHeaderKey(h)
	if _, dup := k[h]; dup {
		return fmt.Errorf("%q: header %s given twice", v, h)
	}
	k[h] = f
	return nil
}
