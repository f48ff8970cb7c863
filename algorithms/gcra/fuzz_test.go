package gcra_test

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetest"
)

// FuzzScriptMatchesModel: the Lua script on a real redis-server against the
// Go model (see sluicetest.FuzzScriptMatchesModel).
//
//	go test -run '^$' -fuzz FuzzScriptMatchesModel ./algorithms/gcra/
func FuzzScriptMatchesModel(f *testing.F) { sluicetest.FuzzScriptMatchesModel(f, "gcra") }
