package builtins

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// Main runs the tests of a package and then stops the shared redis-server
// and cluster, if one was started (see [redistest.Main]). In a process
// started by [RunJob] (or [RunLoad]) it runs the job instead. Call it from
// TestMain: func TestMain(m *testing.M) { sluicetest.Main(m) }.
func Main(m *testing.M) {
	if name := os.Getenv(jobEnv); name != "" {
		os.Exit(runJob(name)) // a job process started by RunJob
	}
	redistest.Main(m)
}
