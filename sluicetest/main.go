package sluicetest

import (
	"fmt"
	"testing"
	"time"
)

// UniqueKey returns a key prefix unique to tb, so that tests sharing one
// server do not see each other's keys.
func UniqueKey(tb testing.TB) string {
	return fmt.Sprintf("t:%d:%s", time.Now().UnixNano(), tb.Name())
}
