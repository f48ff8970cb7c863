package sluice_test

import (
	"slices"
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

func TestScriptArgs(t *testing.T) {
	packed := sluice.NewPackedScript("return 1", nil)
	for _, c := range []struct {
		name   string
		script *sluice.Script
		args   []int64
		want   []string
	}{
		{"packed, 7 bytes each, big-endian", packed, []int64{1, 0x0102030405, -1, -256},
			[]string{"\x00\x00\x00\x00\x00\x00\x01" + "\x00\x00\x01\x02\x03\x04\x05" + "\xff\xff\xff\xff\xff\xff\xff" + "\xff\xff\xff\xff\xff\xff\x00"}},
		{"2^53 and -2^53 still packed", packed, []int64{1 << 53, -1 << 53},
			[]string{"\x20\x00\x00\x00\x00\x00\x00" + "\xe0\x00\x00\x00\x00\x00\x00"}},
		{"a number beyond 2^53: one per argument", packed, []int64{5, 1<<53 + 1}, []string{"0x5", "0x20000000000001"}},
		{"a number below -2^53: one per argument", packed, []int64{-1<<53 - 1}, []string{"-9007199254740993"}},
		{"no numbers: no argument", packed, nil, []string{}},
		{"a hex script: one per argument", sluice.NewHexScript("return 1", nil), []int64{31, -31}, []string{"0x1f", "-31"}},
		{"any other script: decimal", sluice.NewScript("return 1", nil), []int64{31, -31}, []string{"31", "-31"}},
	} {
		if got := c.script.Args(c.args); !slices.Equal(got, c.want) {
			t.Errorf("%s: Args(%v) = %q, want %q", c.name, c.args, got, c.want)
		}
	}
	if got := packed.Arg(31); got != "0x1f" {
		t.Errorf("a packed script's Arg(31) = %q, want hex", got)
	}
}
