package main

import (
	"io"

	"github.com/clawea/attester/cmd/internal/buildinfo"
)

// versionOr prints the version to stdout when it is the only argument,
// else returns run(). --version with other arguments is a usage error in run.
func versionOr(args []string, stdout io.Writer, run func() int) int {
	return buildinfo.VersionOr("attester", args, stdout, run)
}
