// Package buildinfo tells which build of a clawea command is running, for
// the commands' --version flag.
//
// Release builds stamp the version at link time (the Makefile and the
// Dockerfile pass `git describe --tags --always --dirty`):
//
//	go build -ldflags "-X github.com/clawea/attester/cmd/internal/buildinfo.version=v1.2.3" ./cmd/...
//
// Without a stamp the version comes from the Go toolchain's build
// information: the module version when built with `go install module@version`,
// else the VCS revision (with "-dirty" when the tree had local changes),
// else "devel".
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set only by the linker (-X); nothing assigns it at run time.
var version string

// Version returns the version of the running binary.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return resolve(version, bi)
}

// Line returns the line a command prints for --version, for example
// "attester v1.2.3 go1.26.8 linux/amd64".
func Line(command string) string {
	return fmt.Sprintf("%s %s %s %s/%s", command, Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// resolve picks the version: the linker stamp, else the module version,
// else the VCS revision, else "devel".
func resolve(stamp string, bi *debug.BuildInfo) string {
	if stamp != "" {
		return stamp
	}
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += "-dirty"
	}
	return "devel-" + rev
}

// VersionOr prints Line(command) to stdout and returns 0 when args is
// exactly one --version flag; otherwise it returns run(). The command's own
// flag parsing refuses --version mixed with other arguments.
func VersionOr(command string, args []string, stdout io.Writer, run func() int) int {
	if len(args) == 1 {
		switch args[0] {
		case "-version", "--version", "-version=true", "--version=true":
			fmt.Fprintln(stdout, Line(command))
			return 0
		}
	}
	return run()
}
