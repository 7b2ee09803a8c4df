//go:build !linux

package server

import (
	"errors"
	"os"
)

// tryLock is only implemented on Linux; elsewhere the control socket is
// refused.
func tryLock(*os.File) error { return errors.New("file locking is not supported on this platform") }

func fileOwner(os.FileInfo) (int, bool) { return 0, false }

func fileGroup(os.FileInfo) (int, bool) { return 0, false }
