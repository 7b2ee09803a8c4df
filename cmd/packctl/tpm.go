package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/tpmcred"
)

// runTPM dispatches "packctl tpm activate|check" (docs/spec/platform-tpm.md
// section 2.4).
func runTPM(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const synopsis = "tpm activate|check [flags]\n\n" +
		"  activate  certify this machine's TPM attestation key through its EK (credential\n" +
		"            activation run on the machine) and write a certification record\n" +
		"  check     verify a certification record offline against TPM manufacturer roots"
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: packctl %s\n", synopsis)
		return exitUsage
	}
	switch args[0] {
	case "activate":
		return runTPMActivate(args[1:], stdout, stderr)
	case "check":
		return runTPMCheck(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, "usage: packctl %s\n", synopsis)
		return exitOK
	}
	errorf(stderr, "tpm: unknown subcommand %q", args[0])
	return exitUsage
}

// multiFlag collects a repeated string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// tpmSummary is what activate and check print.
type tpmSummary struct {
	AKNameHex         string `json:"ak_name_hex"`
	CertificationB64u string `json:"certification_b64u"`
	EKSubject         string `json:"ek_subject"`
	EKSerial          string `json:"ek_serial"`
	TPMManufacturer   string `json:"tpm_manufacturer,omitempty"`
	TPMModel          string `json:"tpm_model,omitempty"`
	TPMVersion        string `json:"tpm_version,omitempty"`
	EKRootSHA256      string `json:"ek_root_sha256"`
	EKRootSubject     string `json:"ek_root_subject"`
	ActivatedAt       string `json:"activated_at"`
	ActivatedBy       string `json:"activated_by"`
}

func printSummary(stdout io.Writer, s tpmSummary, asJSON bool) {
	if asJSON {
		b, _ := json.MarshalIndent(s, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return
	}
	fmt.Fprintf(stdout, "ak_name_hex: %s\n", s.AKNameHex)
	fmt.Fprintf(stdout, "ek: %s (serial %s)\n", s.EKSubject, s.EKSerial)
	if s.TPMManufacturer != "" {
		fmt.Fprintf(stdout, "tpm: manufacturer %s, model %s, version %s\n", s.TPMManufacturer, s.TPMModel, s.TPMVersion)
	}
	fmt.Fprintf(stdout, "ek root: %s (sha256 %s)\n", s.EKRootSubject, s.EKRootSHA256)
	fmt.Fprintf(stdout, "activated: %s by %q (stated by the record)\n", s.ActivatedAt, s.ActivatedBy)
	fmt.Fprintf(stdout, "certification_b64u: %s\n", s.CertificationB64u)
}

func runTPMActivate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tpm activate", "tpm activate (--device PATH | --address HOST:PORT) --ek-roots FILE --by NAME -o FILE [--intermediate FILE]... [--json]\n\n"+
		"Runs credential activation on this machine, both halves: a credential made in\n"+
		"software for the AK Name, encrypted to the EK of the TPM's EK certificate, then\n"+
		"TPM2_ActivateCredential. Writes the certification record to FILE (never\n"+
		"overwritten). Run it on the machine being enrolled: the record says that\n"+
		"NAME saw this AK in the TPM holding this EK.", stderr)
	device := fs.String("device", "", "TPM character `device` (e.g. /dev/tpmrm0)")
	address := fs.String("address", "", "swtpm `host:port` (tests and development; evidence is simulated)")
	by := fs.String("by", "", "who runs the activation, recorded as activated_by (required)")
	out := fs.String("o", "", "certification record `file` to create (required)")
	roots := fs.String("ek-roots", "", "PEM `file` of TPM manufacturer roots the EK certificate must chain to (required)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	var inters multiFlag
	fs.Var(&inters, "intermediate", "PEM or DER `file` of EK certificate intermediates (repeatable)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "ek-roots", "by", "o") || !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	if (*device == "") == (*address == "") {
		errorf(stderr, "tpm activate: need exactly one of --device and --address")
		fs.Usage()
		return exitUsage
	}
	var interDER [][]byte
	for _, p := range inters {
		certs, err := readCerts(p)
		if err != nil {
			errorf(stderr, "tpm activate: --intermediate: %v", err)
			return exitCannot
		}
		for _, c := range certs {
			interDER = append(interDER, c.Raw)
		}
	}
	pool, code := readRootPool(*roots, "tpm activate", stderr)
	if code != exitOK {
		return code
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tp, err := tpm.Open(ctx, tpm.Options{Device: *device, Address: *address})
	if err != nil {
		errorf(stderr, "tpm activate: %v", err)
		return exitCannot
	}
	defer tp.Close()
	ekCert := tp.EKCertificate()
	if ekCert == nil {
		errorf(stderr, "tpm activate: the TPM has no EK certificate in NV; pin the AK instead")
		return exitCannot
	}
	act, ch, err := tpmcred.NewActivation(rand.Reader, ekCert, tp.AKPublic())
	if err != nil {
		errorf(stderr, "tpm activate: %v", err)
		return exitRejected
	}
	resp, err := tp.ActivateCredential(ctx, ch.Marshal())
	if err != nil {
		errorf(stderr, "tpm activate: %v", err)
		if errors.Is(err, enclave.ErrNotAvailable) || errors.Is(err, context.DeadlineExceeded) {
			return exitCannot
		}
		return exitRejected
	}
	certified, err := act.Check(resp)
	if err != nil {
		errorf(stderr, "tpm activate: %v", err)
		return exitRejected
	}
	rec, err := tpmcred.NewCertification(certified, interDER, time.Now(), *by)
	if err != nil {
		errorf(stderr, "tpm activate: %v", err)
		return exitUsage
	}
	sum, code := summarize(rec, pool, "tpm activate", stderr)
	if code != exitOK {
		return code
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		errorf(stderr, "tpm activate: %v", err)
		return exitCannot
	}
	if _, err := f.Write(rec.Marshal()); err != nil {
		f.Close()
		os.Remove(*out)
		errorf(stderr, "tpm activate: cannot write %s", *out)
		return exitCannot
	}
	if err := f.Close(); err != nil {
		os.Remove(*out)
		errorf(stderr, "tpm activate: cannot write %s", *out)
		return exitCannot
	}
	printSummary(stdout, sum, *asJSON)
	return exitOK
}

func runTPMCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tpm check", "tpm check --ek-roots FILE [--json] RECORD\n\n"+
		"Verifies a certification record offline: the AK's attributes, the EK key, and the\n"+
		"EK certificate chain to one of the roots now. The activation itself cannot be\n"+
		"re-checked: it rests on whoever made the record.", stderr)
	roots := fs.String("ek-roots", "", "PEM `file` of TPM manufacturer roots (required)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "ek-roots") || !wantArgs(fs, stderr, 1, "RECORD") {
		return exitUsage
	}
	pool, code := readRootPool(*roots, "tpm check", stderr)
	if code != exitOK {
		return code
	}
	raw, err := readInput(fs.Arg(0))
	if err != nil {
		errorf(stderr, "tpm check: %v", err)
		return exitCannot
	}
	rec, err := tpmcred.ParseCertification(raw)
	if err != nil {
		errorf(stderr, "tpm check: %v", err)
		return exitRejected
	}
	sum, code := summarize(rec, pool, "tpm check", stderr)
	if code != exitOK {
		return code
	}
	printSummary(stdout, sum, *asJSON)
	return exitOK
}

// summarize verifies rec against pool and describes it.
func summarize(rec *tpmcred.Certification, pool *x509.CertPool, cmd string, stderr io.Writer) (tpmSummary, int) {
	s := tpmSummary{
		CertificationB64u: b64u.Encode(rec.Marshal()),
		ActivatedAt:       rec.ActivatedAt.Format(time.RFC3339),
		ActivatedBy:       rec.ActivatedBy,
	}
	c, err := tpmcred.VerifyCertification(rec, tpmcred.VerifyOpts{Roots: pool, Now: time.Now()})
	if err != nil {
		errorf(stderr, "%s: %v", cmd, err)
		return s, exitRejected
	}
	sum := sha256.Sum256(c.Root.Raw)
	s.AKNameHex = hex.EncodeToString(c.AKName)
	s.EKSubject, s.EKSerial = c.EKCert.Subject.String(), c.EKCert.SerialNumber.Text(16)
	s.EKRootSHA256, s.EKRootSubject = hex.EncodeToString(sum[:]), c.Root.Subject.String()
	if c.TPM != nil {
		s.TPMManufacturer, s.TPMModel, s.TPMVersion = c.TPM.Manufacturer, c.TPM.Model, c.TPM.Version
	}
	return s, exitOK
}

// readCerts reads one or more certificates from a PEM file (CERTIFICATE
// blocks only) or a single DER certificate.
func readCerts(path string) ([]*x509.Certificate, error) {
	b, err := readInput(path)
	if err != nil {
		return nil, err
	}
	if blk, _ := pem.Decode(b); blk == nil {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return nil, fmt.Errorf("%s: not a PEM or DER certificate", path)
		}
		return []*x509.Certificate{c}, nil
	}
	var out []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: unexpected PEM block %q", path, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// readRootPool reads the --ek-roots file into a pool.
func readRootPool(path, cmd string, stderr io.Writer) (*x509.CertPool, int) {
	certs, err := readCerts(path)
	if err != nil {
		errorf(stderr, "%s: --ek-roots: %v", cmd, err)
		return nil, exitCannot
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, exitOK
}
