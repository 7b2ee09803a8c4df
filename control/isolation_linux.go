//go:build linux

package control

import (
	"io/fs"
	"os"
	"syscall"
)

// lstatOwner returns path's mode (not following a final symlink), owner
// and group.
func lstatOwner(path string) (fs.FileMode, int, int, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0, &fs.PathError{Op: "lstat", Path: path, Err: syscall.ENOTSUP}
	}
	return fi.Mode(), int(st.Uid), int(st.Gid), nil
}
