package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// allowOnly is a limiter with no optional capability.
type allowOnly struct{}

func (allowOnly) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return sluice.Decision{Allowed: true}, nil
}

// reportsNone has the methods but reports that it serves none of them, as
// a decorator over allowOnly would.
type reportsNone struct{ allowOnly }

func (reportsNone) Reset(context.Context, string) error { return nil }
func (reportsNone) Capabilities() sluice.Capability     { return 0 }

func TestCapabilitiesOfSeesInterfacesAndReports(t *testing.T) {
	if got := sluice.CapabilitiesOf(allowOnly{}); got != 0 {
		t.Fatalf("allowOnly: %s, want none", got)
	}
	if sluice.Supports(reportsNone{}, sluice.CanReset) {
		t.Fatal("a Capabler's report must win over its method set")
	}
	if got := (sluice.CanRefund | sluice.CanBatch).String(); got != "refund|batch" {
		t.Fatalf("String: %q", got)
	}
}

func TestRequireCapabilitiesNamesBothLayers(t *testing.T) {
	err := sluice.RequireCapabilities("coalesce", allowOnly{}, sluice.CanBatch)
	if !errors.Is(err, sluice.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	for _, want := range []string{"coalesce", "allowOnly", "batch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := sluice.RequireCapabilities("coalesce", nil, 0); err == nil {
		t.Fatal("a nil limiter must be refused")
	}
}
