//go:build !unix

package audit

import (
	"errors"
	"io/fs"
	"os"
)

var errUnsupported = errors.New("durable audit log needs a unix system")

func lockFile(*os.File) error { return errUnsupported }

func syncDir(string) error { return errUnsupported }

func ownedByOther(fs.FileInfo) bool { return true }
