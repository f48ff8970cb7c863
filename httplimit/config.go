package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/coalesce"
)

// FileConfig is the shape of a policy file, YAML or JSON. Every field of
// a [FilePolicy] is the [Policy] field of the same name:
//
//	policies:
//	  - name: per-ip
//	    algorithm: tokenbucket   # or gcra, fixedwindow, slidingcounter, slidinglog
//	    rate: 100                # a whole number
//	    period: 1m
//	    burst: 20                # buckets only; default: rate
//	    cost: 1                  # default: 1
//	    key: remote-addr         # or "header:X-API-Key"
//	    routes: ["POST /orders"] # net/http ServeMux patterns; none: every route
//	    coalesce: true           # concurrent requests share script calls (package coalesce)
type FileConfig struct {
	Policies []FilePolicy `yaml:"policies" json:"policies"`
}

// FilePolicy is one policy of a [FileConfig].
type FilePolicy struct {
	Name      string      `yaml:"name" json:"name"`
	Algorithm string      `yaml:"algorithm" json:"algorithm"`
	Rate      WholeNumber `yaml:"rate" json:"rate"`
	Period    string      `yaml:"period" json:"period"`
	Burst     WholeNumber `yaml:"burst" json:"burst"`
	Cost      WholeNumber `yaml:"cost" json:"cost"`
	Key       string      `yaml:"key" json:"key"`
	Routes    []string    `yaml:"routes" json:"routes"`
	// Coalesce wraps the policy's limiter in coalesce.New: decisions stay
	// exact, and concurrent requests share script calls.
	Coalesce bool `yaml:"coalesce" json:"coalesce"`
}

// WholeNumber is a number of a policy file as written, so that a
// fraction (2.9) or an exponent is refused rather than truncated.
type WholeNumber struct {
	text string // "" when absent
}

// UnmarshalYAML keeps the scalar's text.
func (n *WholeNumber) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a whole number", node.Line)
	}
	n.text = node.Value
	return nil
}

// UnmarshalJSON keeps the number's text.
func (n *WholeNumber) UnmarshalJSON(data []byte) error {
	n.text = string(data)
	return nil
}

// value parses n, 0 when absent; field names it in the error.
func (n WholeNumber) value(field string) (int64, error) {
	if n.text == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(n.text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a whole number", field, n.text)
	}
	return v, nil
}

// Load parses a policy file, YAML or JSON, and builds each policy's
// limiter on store; pass the policies to [Middleware]. Unknown fields,
// algorithms and keys are errors, as are numbers that are not whole, a
// JSON document with anything after it (trailing commas included), a
// second YAML document, and everything Middleware refuses. Each error
// names the policy and the field.
func Load(data []byte, store sluice.Store) ([]Policy, error) {
	fc, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("httplimit: parse policies: %w", err)
	}
	if len(fc.Policies) == 0 {
		return nil, errors.New("httplimit: the file defines no policy")
	}
	policies := make([]Policy, len(fc.Policies))
	for i, fp := range fc.Policies {
		p, err := fp.build(store)
		if err != nil {
			return nil, fmt.Errorf("httplimit: policy %d (%q): %w", i+1, fp.Name, err)
		}
		policies[i] = p
	}
	// What Middleware would refuse, refused now.
	if _, err := preparePolicies(policies); err != nil {
		return nil, err
	}
	return policies, nil
}

// parse decodes JSON strictly when data is a JSON object, and YAML
// otherwise (one document).
func parse(data []byte) (FileConfig, error) {
	var fc FileConfig
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			return fc, fmt.Errorf("JSON: %w", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return fc, errors.New("JSON: something follows the document")
		}
		return fc, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		return fc, err
	}
	var second yaml.Node
	if err := dec.Decode(&second); err != io.EOF {
		return fc, errors.New("YAML: the file holds more than one document")
	}
	return fc, nil
}

func (fp FilePolicy) build(store sluice.Store) (Policy, error) {
	rate, err := fp.Rate.value("rate")
	if err != nil {
		return Policy{}, err
	}
	burst, err := fp.Burst.value("burst")
	if err != nil {
		return Policy{}, err
	}
	cost, err := fp.Cost.value("cost")
	if err != nil {
		return Policy{}, err
	}
	period, err := time.ParseDuration(fp.Period)
	if err != nil {
		return Policy{}, fmt.Errorf("period: %q: %w", fp.Period, err)
	}
	if burst == 0 {
		burst = rate
	}
	limiter, err := algorithms.New(fp.Algorithm, store)
	if err != nil {
		return Policy{}, err
	}
	if fp.Coalesce {
		if limiter, err = coalesce.New(limiter); err != nil {
			return Policy{}, err
		}
	}
	var key KeyFunc
	switch {
	case fp.Key == "" || fp.Key == "remote-addr":
		key = RemoteAddr()
	case strings.HasPrefix(fp.Key, "header:"):
		name := strings.TrimPrefix(fp.Key, "header:")
		if err := ValidHeaderName(name); err != nil {
			return Policy{}, fmt.Errorf("key: %w", err)
		}
		key = Header(name)
	default:
		return Policy{}, fmt.Errorf("key: unknown %q (remote-addr or header:Name)", fp.Key)
	}
	return Policy{Name: fp.Name, Limiter: limiter, Limit: sluice.Limit{Rate: rate, Period: period, Burst: burst},
		Cost: cost, Key: key, Routes: fp.Routes}, nil
}
