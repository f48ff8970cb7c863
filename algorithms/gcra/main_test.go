package gcra_test

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetest"
)

func TestMain(m *testing.M) { sluicetest.Main(m) }
