package harness

import (
	"debug/buildinfo"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/envoyrl"
)

// envoyProxyModule is the main module of envoyproxy/ratelimit's
// service_cmd.
const envoyProxyModule = "github.com/envoyproxy/ratelimit"

// CheckForDocs reports whether b, as Find returned it, is what the
// committed figures must measure: a sluice-serve built from a source tree
// (version "(devel)", as bench/run.sh builds the checkout's; an installed
// release carries its version and is refused, since it is not the code
// the docs describe) and envoyproxy/ratelimit at envoyrl.Version, the
// commit the differential test compares with. It reads the binaries'
// build information and runs nothing.
func (b Binaries) CheckForDocs() error {
	var errs []error
	if bi, err := buildinfo.ReadFile(b.SluiceServe); err != nil {
		errs = append(errs, fmt.Errorf("sluice-serve %s: %w", b.SluiceServe, err))
	} else if bi.Main.Path != "github.com/sluicehq/sluice/serve" || bi.Main.Version != "(devel)" {
		errs = append(errs, fmt.Errorf("sluice-serve %s is %s %s, not built from this checkout (bench/run.sh builds it)", b.SluiceServe, bi.Main.Path, bi.Main.Version))
	}
	if bi, err := buildinfo.ReadFile(b.EnvoyProxy); err != nil {
		errs = append(errs, fmt.Errorf("envoyproxy/ratelimit %s: %w", b.EnvoyProxy, err))
	} else if bi.Main.Path != envoyProxyModule || bi.Main.Version != envoyrl.Version {
		errs = append(errs, fmt.Errorf("envoyproxy/ratelimit %s is %s %s, not %s %s (go install %s@%s)",
			b.EnvoyProxy, bi.Main.Path, bi.Main.Version, envoyProxyModule, envoyrl.Version, envoyrl.Module, envoyrl.Version))
	}
	return errors.Join(errs...)
}
