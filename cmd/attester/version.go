package main

import (
	"fmt"
	"io"

	"github.com/clawea/attester/cmd/internal/buildinfo"
)

// versionOr prints the version to stdout when it is the only argument,
// else returns run(). --version with other arguments is a usage error in run.
func versionOr(args []string, stdout io.Writer, run func() int) int {
	if len(args) == 1 {
		switch args[0] {
		case "-version", "--version", "-version=true", "--version=true":
			fmt.Fprintln(stdout, buildinfo.Line("attester"))
			return 0
		}
	}
	return run()
}
