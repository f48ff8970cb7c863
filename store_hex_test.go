package sluice_test

import (
	"testing"

	"github.com/sluicehq/sluice"
)

func TestScriptArg(t *testing.T) {
	hex, dec := sluice.NewHexScript("return 1", nil), sluice.NewScript("return 1", nil)
	for _, c := range []struct {
		script *sluice.Script
		v      int64
		want   string
	}{
		{hex, 31, "0x1f"}, {hex, 0, "0x0"}, {hex, -31, "-31"}, {hex, 1 << 53, "0x20000000000000"},
		{dec, 31, "31"}, {dec, -31, "-31"},
	} {
		if got := c.script.Arg(c.v); got != c.want {
			t.Errorf("Arg(%d) = %q, want %q", c.v, got, c.want)
		}
	}
	if hex.SHA1() != dec.SHA1() {
		t.Error("the same source has one SHA1, whatever its arguments")
	}
}
