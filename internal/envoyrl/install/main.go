// Command install installs envoyproxy/ratelimit's service command at
// envoyrl.Version into the user cache directory (envoyrl.Binary: where
// serve/envoydiff, the benchmark's tests and sluice-bench look for it),
// unless it is there already, and prints its path. It runs go install:
// bench/run.sh runs it in the repository's checkout as
// `go run ./internal/envoyrl/install`.
package main

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/internal/envoyrl"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/envoyrl/install (no arguments)")
		os.Exit(2)
	}
	bin, err := envoyrl.Binary(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "envoyrl install:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
