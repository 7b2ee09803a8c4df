// Command packctl builds and seals prompt packs and verifies PoH documents
// and execution attestations offline.
//
// Exit codes (documented in docs/spec/packctl.md):
//
//	0  success / verified
//	1  usage error
//	2  rejected: the input is bad (signature, hash, format, binding)
//	3  could not check: a file could not be read, or a dependency is missing
//	4  refused by policy
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit codes.
const (
	exitOK       = 0
	exitUsage    = 1
	exitRejected = 2
	exitCannot   = 3
	exitPolicy   = 4
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"poh", "verify PoH envelopes and compute PoH hashes", runPoH},
		{"keygen", "generate a prompt-pack recipient key pair", runKeygen},
		{"build", "build a plaintext prompt pack", runBuild},
		{"admission", "suggest the strictest admission policy that admits a pack", runAdmission},
		{"render", "rebuild a pack's system prompt to stdout", runRender},
		{"report", "print a pack's SystemPromptReport.v1", runReport},
		{"seal", "encrypt a pack for recipients", runSeal},
		{"open", "decrypt a sealed pack (debug only)", runOpen},
		{"inspect", "show a manifest or envelope (hash-only)", runInspect},
		{"verify", "verify an execution attestation offline", runVerify},
		{"disclose", "reveal chosen inputs of a v2 pack to an auditor", runDisclose},
		{"verify-disclosure", "check a disclosure against its report (and attestation)", runVerifyDisclosure},
		{"tpm", "certify a TPM attestation key through its EK, check a record", runTPM},
		{"collateral", "fetch or check AMD/Intel collateral for evidence (fetch, check)", runCollateral},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: packctl <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-18s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'packctl <command> -h' for a command's flags, 'packctl --version' for the version.")
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		return printVersion(args[1:], stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "packctl: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

// newFlagSet returns a FlagSet that writes usage to stderr and never exits.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("packctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: packctl %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses and maps -h to exit 0 and errors to exitUsage; ok is
// false when the caller should return code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

func errorf(stderr io.Writer, format string, args ...any) {
	fmt.Fprintf(stderr, "packctl: "+format+"\n", args...)
}
