package slidinglog_test

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetest/builtins"
)

func TestMain(m *testing.M) { builtins.Main(m) }
