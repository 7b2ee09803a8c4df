package main

import (
	"fmt"
	"io"

	"github.com/clawea/attester/cmd/internal/buildinfo"
)

// printVersion prints the version line; --version takes no arguments.
func printVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "packctl: --version takes no arguments")
		return exitUsage
	}
	fmt.Fprintln(stdout, buildinfo.Line("packctl"))
	return exitOK
}
