package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"

	"github.com/clawea/attester/gate/openclawcheck"
)

// runOpenClaw is `packctl openclaw check [--json] [--harness-user NAME]
// CONFIG`: the operator's preflight of an OpenClaw configuration.
func runOpenClaw(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: packctl openclaw check [--json] [--harness-user NAME] CONFIG")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return exitOK
		}
		return exitUsage
	}
	fs := newFlagSet("openclaw check", "openclaw check [--json] [--harness-user NAME] CONFIG\n\n"+
		"Reports every setting of an OpenClaw configuration (JSON5, as OpenClaw reads it)\n"+
		"that would let OpenClaw run an agent without the clawea gate, or with the\n"+
		"model's tools outside the recommended layout. Exit 0: none; 4: findings.", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	harness := fs.String("harness-user", "", "the `account` OpenClaw runs as (default: the current user)")
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	if !wantArgs(fs, stderr, 1, "CONFIG") {
		return exitUsage
	}
	h, err := harnessHost(*harness)
	if err != nil {
		return fail(stderr, "openclaw check", exitCannot, err)
	}
	cfg, err := readInput(fs.Arg(0))
	if err != nil {
		return fail(stderr, "openclaw check", exitCannot, err)
	}
	findings, err := openclawcheck.Check(cfg, h)
	if errors.Is(err, openclawcheck.ErrMalformed) {
		errorf(stderr, "openclaw check: %s: %v", fs.Arg(0), err)
		return exitRejected
	}
	if err != nil {
		return fail(stderr, "openclaw check", exitCannot, err)
	}
	if *asJSON {
		if findings == nil {
			findings = []openclawcheck.Finding{}
		}
		printJSON(stdout, map[string]any{"ok": len(findings) == 0, "findings": findings})
	} else if len(findings) == 0 {
		fmt.Fprintf(stdout, "OK: no setting in %s lets OpenClaw run an agent without the clawea gate or outside the layout\n", fs.Arg(0))
	} else {
		fmt.Fprintf(stdout, "UNSAFE: %d findings in %s\n", len(findings), fs.Arg(0))
		for _, f := range findings {
			fmt.Fprintf(stdout, "  %s\n", f)
		}
	}
	if len(findings) > 0 {
		return exitPolicy
	}
	return exitOK
}

// harnessHost describes the account OpenClaw runs as: name (or the current
// user when empty) with its uid and home directory.
func harnessHost(name string) (openclawcheck.Host, error) {
	var u *user.User
	var err error
	if name == "" {
		u, err = user.Current()
	} else {
		u, err = user.Lookup(name)
	}
	if err != nil {
		return openclawcheck.Host{}, fmt.Errorf("harness account: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return openclawcheck.Host{}, fmt.Errorf("harness account %q: uid %q is not numeric", u.Username, u.Uid)
	}
	home := u.HomeDir
	if name == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	return openclawcheck.Host{HarnessUser: u.Username, HarnessUID: uid, HomeDir: home}, nil
}
