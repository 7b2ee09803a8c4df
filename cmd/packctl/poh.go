package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/verify"
)

// maxInputBytes bounds every file packctl reads.
const maxInputBytes = 64 << 20

func readInput(path string) ([]byte, error) { return readArgOrStdin(path, maxInputBytes) }

func runPoH(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return dispatch("poh", "poh verify-bundle FILE\n       packctl poh nonce-binding --agent DID --run ID --bundle-hash B64U",
		subcommands{"verify-bundle": pohVerifyBundle, "nonce-binding": pohNonceBinding}, args, stdout, stderr)
}

func pohVerifyBundle(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("poh verify-bundle", "poh verify-bundle [--receipt-signer DID]... FILE", stderr)
	var signers stringList
	fs.Var(&signers, "receipt-signer", "allowlisted gateway receipt signer DID (repeatable)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !wantArgs(fs, stderr, 1, "FILE") {
		return exitUsage
	}
	raw, err := readInput(fs.Arg(0))
	if err != nil {
		errorf(stderr, "%v", err)
		return exitCannot
	}
	b, err := poh.VerifyProofBundle(raw, poh.BundleOptions{ReceiptSignerDIDs: signers})
	if err != nil {
		if pe, ok := errors.AsType[*poh.Error](err); ok {
			if *asJSON {
				printJSON(stdout, map[string]any{"verdict": verify.VerdictRejected, "exit_code": exitRejected, "poh_code": string(pe.Code), "message": err.Error()})
			} else {
				fmt.Fprintf(stdout, "REJECTED %s\n", pe.Code)
			}
			errorf(stderr, "%v", err)
			return exitRejected
		}
		errorf(stderr, "%v", err)
		return exitCannot
	}
	allow := 0
	for _, r := range b.Receipts {
		if r.Allowlisted {
			allow++
		}
	}
	if *asJSON {
		printJSON(stdout, struct {
			Verdict         string `json:"verdict"`
			ExitCode        int    `json:"exit_code"`
			BundleID        string `json:"bundle_id"`
			AgentDID        string `json:"agent_did"`
			RunID           string `json:"run_id"`
			Events          int    `json:"events"`
			Receipts        int    `json:"receipts"`
			Allowlisted     int    `json:"allowlisted_receipts"`
			PayloadHashB64u string `json:"payload_hash_b64u"`
		}{verify.VerdictVerified, exitOK, b.BundleID, b.AgentDID, b.RunID, len(b.Events), len(b.Receipts), allow, b.Envelope.PayloadHashB64u})
		return exitOK
	}
	fmt.Fprintf(stdout, "VERIFIED bundle=%s agent=%s run=%s events=%d receipts=%d (allowlisted %d) payload_hash=%s\n",
		b.BundleID, b.AgentDID, b.RunID, len(b.Events), len(b.Receipts), allow, b.Envelope.PayloadHashB64u)
	return exitOK
}

func pohNonceBinding(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("poh nonce-binding", "poh nonce-binding --agent DID --run ID --bundle-hash B64U", stderr)
	agent := fs.String("agent", "", "agent DID")
	runID := fs.String("run", "", "run id")
	hash := fs.String("bundle-hash", "", "proof bundle payload_hash_b64u")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "agent", "run", "bundle-hash") || !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	b, err := poh.NonceBindingB64u(*agent, *runID, *hash)
	if err != nil {
		errorf(stderr, "%v", err)
		return exitRejected
	}
	if *asJSON {
		printJSON(stdout, map[string]string{"nonce_binding_b64u": b})
		return exitOK
	}
	fmt.Fprintln(stdout, b)
	return exitOK
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
