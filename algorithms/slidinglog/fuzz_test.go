package slidinglog_test

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetest"
)

// FuzzScriptMatchesModel: the Lua script on a real redis-server against the
// Go model (see sluicetest.FuzzScriptMatchesModel).
//
//	go test -run '^$' -fuzz FuzzScriptMatchesModel ./algorithms/slidinglog/
func FuzzScriptMatchesModel(f *testing.F) { sluicetest.FuzzScriptMatchesModel(f, "slidinglog") }
