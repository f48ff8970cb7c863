package slidingcounter_test

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetest/builtins"
)

// FuzzScriptMatchesModel: the Lua script on a real redis-server against the
// Go model (see builtins.FuzzScriptMatchesModel).
//
//	go test -run '^$' -fuzz FuzzScriptMatchesModel ./algorithms/slidingcounter/
func FuzzScriptMatchesModel(f *testing.F) { builtins.FuzzScriptMatchesModel(f, "slidingcounter") }
