//go:build !linux

package control

import (
	"errors"
	"io/fs"
)

// lstatOwner is only implemented on Linux; elsewhere the socket layout
// cannot be read, so it counts as not protected and a non-development
// attester refuses to start (fail closed).
func lstatOwner(path string) (fs.FileMode, int, int, error) {
	return 0, 0, 0, &fs.PathError{Op: "lstat", Path: path, Err: errors.ErrUnsupported}
}
