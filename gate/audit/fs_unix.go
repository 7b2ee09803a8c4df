//go:build unix

package audit

import (
	"io/fs"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking lock on f (released when f is
// closed or the process dies).
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// syncDir fsyncs a directory so that new entries in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ownedByOther reports whether info (from Lstat) names a file another user
// owns.
func ownedByOther(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) != os.Geteuid()
}
