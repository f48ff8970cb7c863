// Command dumpscripts writes every algorithm's Lua scripts (the decision
// script, as EVALSHA runs it, and the batch script) into a directory, as
// NAME.lua and NAME_batch.lua, and the shared prelude as prelude.lua, for
// measuring them outside Go (bench/instructions.sh).
//
//	go run ./internal/cmd/dumpscripts DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/sluicehq/sluice/algorithms/fixedwindow"
	_ "github.com/sluicehq/sluice/algorithms/gcra"
	_ "github.com/sluicehq/sluice/algorithms/slidingcounter"
	_ "github.com/sluicehq/sluice/algorithms/slidinglog"
	_ "github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext/algorithm"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dumpscripts DIR")
		os.Exit(2)
	}
	if err := dump(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "dumpscripts:", err)
		os.Exit(1)
	}
}

func dump(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{"prelude.lua": algorithm.Prelude()}
	for _, name := range []string{"tokenbucket", "gcra", "fixedwindow", "slidingcounter", "slidinglog"} {
		spec := algorithm.Registered(name)
		if spec == nil {
			return fmt.Errorf("algorithm %s is not registered", name)
		}
		files[name+".lua"] = spec.Script.Source()
		files[name+"_batch.lua"] = spec.BatchScript.Source()
	}
	for name, source := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(source), 0o644); err != nil {
			return err
		}
	}
	return nil
}
