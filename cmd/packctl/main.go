// Command packctl builds and seals prompt packs and verifies PoH documents
// and execution attestations offline.
//
// Exit codes (documented in the README, "packctl exit codes"):
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
	"strings"

	"github.com/clawea/attester/schema/bounded"
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
		{"releases", "list the OpenClaw releases openclaw-release packs can be built for", runReleases},
		{"admission", "suggest the strictest admission policy that admits a pack", runAdmission},
		{"render", "rebuild a pack's system prompt to stdout", runRender},
		{"report", "print a pack's SystemPromptReport.v1", runReport},
		{"seal", "encrypt a pack for recipients", runSeal},
		{"open", "decrypt a sealed pack (debug only)", runOpen},
		{"inspect", "show what a file says, unverified (evidence, identity, pack, ...)", runInspect},
		{"verify", "verify an execution attestation offline", runVerify},
		{"ear", "verify an EAR (attestation result) against the verifier's keys (verify)", runEAR},
		{"disclose", "reveal chosen inputs of a v2 pack to an auditor", runDisclose},
		{"verify-disclosure", "check a disclosure against its report (and attestation)", runVerifyDisclosure},
		{"platform", "verify raw platform evidence (SNP report, TDX quote, ...) offline (verify)", runPlatform},
		{"policy", "write a verify policy from a first contact with an attester (TOFU)", runPolicy},
		{"tpm", "certify a TPM attestation key through its EK, check a record", runTPM},
		{"collateral", "fetch or check AMD/Intel collateral for evidence (fetch, check)", runCollateral},
		{"openclaw", "check an OpenClaw config for settings that bypass the gate (check)", runOpenClaw},
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

func run(args []string, in io.Reader, stdout, stderr io.Writer) int {
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
			cmdStdin.r, cmdStdin.used = in, false
			return c.run(args[1:], in, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "packctl: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

// subcommands are the words of a command group (packctl tpm activate).
type subcommands map[string]func(args []string, stdout, stderr io.Writer) int

// dispatch runs the subcommand of group that args[0] names. No argument
// prints the group's usage to stderr (exit 1); -h, --help or help prints it
// to stdout (exit 0); another word is refused (exit 1).
func dispatch(group, synopsis string, subs subcommands, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: packctl %s\n", synopsis)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, "usage: packctl %s\n", synopsis)
		return exitOK
	}
	if sub, ok := subs[args[0]]; ok {
		return sub(args[1:], stdout, stderr)
	}
	errorf(stderr, "%s: unknown subcommand %q", group, args[0])
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
// false when the caller should return code. Flags and positional arguments
// may be interspersed (interspersed); "--" ends the flags.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(interspersed(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// interspersed moves the flags of args (as fs defines them) before the
// positional arguments, so that "packctl inspect FILE --json" parses like
// "packctl inspect --json FILE". A flag that takes a value keeps the next
// argument as its value; "--" ends the flags, and everything after it
// stays positional. The positionals follow a "--" in the result, so that a
// positional that looks like a flag is never parsed as one.
func interspersed(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // fs.Parse reports it
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if len(pos) == 0 {
		return flags
	}
	return append(append(flags, "--"), pos...)
}

// requireFlags names on stderr every required flag that was not given (an
// empty value counts as not given) and prints the usage; it reports
// whether all were given.
func requireFlags(fs *flag.FlagSet, stderr io.Writer, names ...string) bool {
	var missing []string
	for _, n := range names {
		if f := fs.Lookup(n); f == nil || f.Value.String() == "" {
			missing = append(missing, flagName(n))
		}
	}
	if len(missing) == 0 {
		return true
	}
	word := "flag"
	if len(missing) > 1 {
		word = "flags"
	}
	fmt.Fprintf(stderr, "%s: missing required %s %s\n", fs.Name(), word, strings.Join(missing, ", "))
	fs.Usage()
	return false
}

// wantArgs checks the number of positional arguments and names the
// expected ones when it is wrong.
func wantArgs(fs *flag.FlagSet, stderr io.Writer, n int, what string) bool {
	if fs.NArg() == n {
		return true
	}
	switch {
	case n == 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
	case fs.NArg() < n:
		fmt.Fprintf(stderr, "%s: missing argument %s\n", fs.Name(), what)
	default:
		fmt.Fprintf(stderr, "%s: want only %s, got %d arguments\n", fs.Name(), what, fs.NArg())
	}
	fs.Usage()
	return false
}

func flagName(n string) string {
	if len(n) == 1 {
		return "-" + n
	}
	return "--" + n
}

func errorf(stderr io.Writer, format string, args ...any) {
	fmt.Fprintf(stderr, "packctl: "+format+"\n", args...)
}

// fail reports err on stderr as cmd's error and returns code.
func fail(stderr io.Writer, cmd string, code int, err error) int {
	errorf(stderr, "%s: %v", cmd, err)
	return code
}

// runSteps runs the named steps of a command in order and returns the exit
// code of the first one that fails, or exitOK. A step reports its own
// error on stderr.
func runSteps(steps ...func() int) int {
	for _, step := range steps {
		if code := step(); code != exitOK {
			return code
		}
	}
	return exitOK
}

// cmdStdin is the standard input of the command being run; run sets it, and
// readArgOrStdin reads it for an input named "-", once per command.
var cmdStdin = struct {
	r    io.Reader
	used bool
}{r: os.Stdin}

// readArgOrStdin reads an input named on the command line, or stdin when
// the name is "-" (at most once per command: a second "-" is an error).
func readArgOrStdin(path string, limit int64) ([]byte, error) {
	if path != "-" {
		return bounded.ReadFile(path, limit)
	}
	if cmdStdin.used {
		return nil, errors.New("stdin (\"-\") can stand for one input only")
	}
	cmdStdin.used = true
	if cmdStdin.r == nil {
		return nil, errors.New("no stdin to read \"-\" from")
	}
	return bounded.Read(cmdStdin.r, limit, "stdin")
}
