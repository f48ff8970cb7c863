//go:build unix

package main

import (
	"os"
	"syscall"
)

// owner is a file's user and group, ok false where the system does not
// say.
func owner(info os.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}
