package main

import (
	"bytes"
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
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/tpmcred"
	"github.com/clawea/attester/wire/tpmquote"
)

// runTPM dispatches "packctl tpm activate|check" (docs/spec/platform-tpm.md
// section 2.4).
func runTPM(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const synopsis = "tpm activate|check [flags]\n\n" +
		"  activate  certify a TPM attestation key through its EK (credential activation,\n" +
		"            against a remote attester or on this machine) and write a certification record\n" +
		"  check     verify a certification record offline against TPM manufacturer roots"
	return dispatch("tpm", synopsis, subcommands{"activate": runTPMActivate, "check": runTPMCheck}, args, stdout, stderr)
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
	fs := newFlagSet("tpm activate", "tpm activate (--attester URL | --device PATH | --address HOST:PORT) --ek-roots FILE --by NAME -o FILE [--intermediate FILE]... [--json]\n\n"+
		"Certifies a TPM attestation key (AK) through its endorsement key (EK) by credential\n"+
		"activation, and writes the certification record to FILE (never overwritten).\n\n"+
		"With --attester, this machine is the verifier: it fetches the EK certificate and the\n"+
		"AK from the attester (GET /v1/tpm/ek), refuses unless the EK certificate chains to\n"+
		"one of the roots, makes the credential for the AK Name here, sends it (POST\n"+
		"/v1/tpm/activate) and checks the answer: the record then says that NAME saw this AK\n"+
		"in the TPM holding this EK. Check the EK serial printed against the machine you mean\n"+
		"to enroll.\n\n"+
		"With --device or --address, both halves run on this machine (the one being enrolled).", stderr)
	attesterURL := fs.String("attester", "", "attester public `URL` (http:// or https://) to certify remotely")
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
	modes := 0
	for _, m := range []string{*attesterURL, *device, *address} {
		if m != "" {
			modes++
		}
	}
	if modes != 1 {
		errorf(stderr, "tpm activate: need exactly one of --attester, --device and --address")
		fs.Usage()
		return exitUsage
	}
	if *attesterURL != "" && !strings.HasPrefix(*attesterURL, "https://") && !strings.HasPrefix(*attesterURL, "http://") {
		errorf(stderr, "tpm activate: --attester must be an http:// or https:// URL")
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
	// Refuse an existing output before any TPM or network work; the
	// O_EXCL create below still decides.
	if _, err := os.Lstat(*out); err == nil {
		errorf(stderr, "tpm activate: %s exists; a certification record is never overwritten", *out)
		return exitCannot
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var certified *tpmcred.Certified
	if *attesterURL != "" {
		certified, code = activateRemote(ctx, *attesterURL, pool, interDER, stderr)
	} else {
		certified, code = activateLocal(ctx, tpm.Options{Device: *device, Address: *address}, stderr)
	}
	if code != exitOK {
		return code
	}
	rec, err := tpmcred.NewCertification(certified, interDER, time.Now(), *by)
	if err != nil {
		return fail(stderr, "tpm activate", exitUsage, err)
	}
	sum, code := summarize(rec, pool, "tpm activate", stderr)
	if code != exitOK {
		return code
	}
	if err := createFile(*out, rec.Marshal(), 0o644); err != nil {
		return fail(stderr, "tpm activate", exitCannot, err)
	}
	printSummary(stdout, sum, *asJSON)
	return exitOK
}

// activateLocal runs both halves of the activation on this machine's TPM.
func activateLocal(ctx context.Context, opts tpm.Options, stderr io.Writer) (*tpmcred.Certified, int) {
	tp, err := tpm.Open(ctx, opts)
	if err != nil {
		return nil, fail(stderr, "tpm activate", exitCannot, err)
	}
	defer tp.Close()
	ekCert := tp.EKCertificate()
	if ekCert == nil {
		errorf(stderr, "tpm activate: the TPM has no EK certificate in NV; pin the AK instead")
		return nil, exitCannot
	}
	return activate(ekCert, tp.AKPublic(), stderr, func(ch *tpmcred.Challenge) ([]byte, int) {
		resp, err := tp.ActivateCredential(ctx, ch.Marshal())
		if err != nil {
			errorf(stderr, "tpm activate: %v", err)
			if errors.Is(err, enclave.ErrNotAvailable) || errors.Is(err, context.DeadlineExceeded) {
				return nil, exitCannot
			}
			return nil, exitRejected
		}
		return resp, exitOK
	})
}

// activate is the verifier's half of an activation, local or remote: it
// makes a credential for the AK under the EK, has answer activate it in
// the TPM holding the EK (ANSWER's own failures carry their exit code), and
// checks the secret that comes back.
func activate(ekCertDER, akPublic []byte, stderr io.Writer, answer func(*tpmcred.Challenge) ([]byte, int)) (*tpmcred.Certified, int) {
	act, ch, err := tpmcred.NewActivation(rand.Reader, ekCertDER, akPublic)
	if err != nil {
		return nil, fail(stderr, "tpm activate", exitRejected, err)
	}
	secret, code := answer(ch)
	if code != exitOK {
		return nil, code
	}
	certified, err := act.Check(secret)
	if err != nil {
		return nil, fail(stderr, "tpm activate", exitRejected, err)
	}
	return certified, exitOK
}

// Remote activation limits.
const (
	// maxTPMEKResponse bounds GET /v1/tpm/ek: a 16 KiB EK certificate and a
	// 1 KiB AK public area in b64u, and the JSON around them.
	maxTPMEKResponse = 32 << 10
	// maxActivateResponse bounds POST /v1/tpm/activate's answer.
	maxActivateResponse = 4 << 10
	// activateTries is how many times a rate-limited challenge is sent.
	activateTries = 3
	// maxRetryAfter is the longest Retry-After honoured.
	maxRetryAfter = 30 * time.Second
)

// activateRemote is the verifier half against an attester's public API
// (docs/spec/platform-tpm.md section 2.4): the EK chain is checked before
// the challenge is made, the secret is drawn and checked here.
func activateRemote(ctx context.Context, base string, pool *x509.CertPool, inters [][]byte, stderr io.Writer) (*tpmcred.Certified, int) {
	base = strings.TrimSuffix(base, "/")
	client := &http.Client{Timeout: 60 * time.Second}
	status, body, _, err := tpmHTTP(ctx, client, http.MethodGet, base+"/v1/tpm/ek", nil, maxTPMEKResponse)
	if err != nil {
		return nil, fail(stderr, "tpm activate", exitCannot, err)
	}
	if status != http.StatusOK {
		errorf(stderr, "tpm activate: GET /v1/tpm/ek: %s", httpStatusText(status, body))
		return nil, exitCannot
	}
	var ekDER, akPub []byte
	var simulated bool
	err = readAnswer(body, maxTPMEKResponse, func(r *jsonobj.Reader, doc *pohjson.Value) {
		m := r.Object(doc, jsonobj.Root, map[string]bool{"ek_cert_b64u": true, "ak_public_b64u": true, "simulated": true})
		ekDER = r.B64u(m["ek_cert_b64u"], jsonobj.Key(jsonobj.Root, "ek_cert_b64u"), 0)
		akPub = r.B64u(m["ak_public_b64u"], jsonobj.Key(jsonobj.Root, "ak_public_b64u"), 0)
		simulated = r.Bool(m["simulated"], jsonobj.Key(jsonobj.Root, "simulated"))
	})
	if err != nil {
		errorf(stderr, "tpm activate: GET /v1/tpm/ek: %v", err)
		return nil, exitRejected
	}
	if len(ekDER) > tpmquote.MaxCertSize {
		errorf(stderr, "tpm activate: the EK certificate is %d bytes", len(ekDER))
		return nil, exitRejected
	}
	ek, err := x509.ParseCertificate(ekDER)
	if err != nil {
		errorf(stderr, "tpm activate: EK certificate: %v", err)
		return nil, exitRejected
	}
	// The chain is checked before any challenge is made or sent.
	root, err := tpmcred.VerifyEKChain(ek, inters, pool, time.Now())
	if err != nil {
		return nil, fail(stderr, "tpm activate", exitRejected, err)
	}
	return activate(ekDER, akPub, stderr, func(ch *tpmcred.Challenge) ([]byte, int) {
		sim := ""
		if simulated {
			sim = " (the attester says its TPM is SIMULATED)"
		}
		errorf(stderr, "tpm activate: EK %s (serial %s) chains to %s%s; sending a credential for AK %s",
			ek.Subject, ek.SerialNumber.Text(16), root.Subject, sim, hex.EncodeToString(ch.AKName))
		return sendChallenge(ctx, client, base, ch, stderr)
	})
}

// sendChallenge posts the challenge to the attester's /v1/tpm/activate,
// retrying while it is rate-limited, and returns the secret it answers.
func sendChallenge(ctx context.Context, client *http.Client, base string, ch *tpmcred.Challenge, stderr io.Writer) ([]byte, int) {
	req, _ := json.Marshal(map[string]string{"challenge_b64u": b64u.Encode(ch.Marshal())})
	for try := 1; ; try++ {
		status, body, retry, err := tpmHTTP(ctx, client, http.MethodPost, base+"/v1/tpm/activate", req, maxActivateResponse)
		if err != nil {
			return nil, fail(stderr, "tpm activate", exitCannot, err)
		}
		if status == http.StatusTooManyRequests && try < activateTries && retry > 0 && retry <= maxRetryAfter {
			errorf(stderr, "tpm activate: the attester is busy; retrying in %s", retry)
			select {
			case <-time.After(retry):
				continue
			case <-ctx.Done():
				errorf(stderr, "tpm activate: %v", ctx.Err())
				return nil, exitCannot
			}
		}
		switch {
		case status == http.StatusUnprocessableEntity:
			errorf(stderr, "tpm activate: the attester refused the credential: %s", httpStatusText(status, body))
			return nil, exitRejected
		case status != http.StatusOK:
			errorf(stderr, "tpm activate: POST /v1/tpm/activate: %s", httpStatusText(status, body))
			return nil, exitCannot
		}
		var secret []byte
		err = readAnswer(body, maxActivateResponse, func(r *jsonobj.Reader, doc *pohjson.Value) {
			m := r.Object(doc, jsonobj.Root, map[string]bool{"secret_b64u": true})
			secret = r.B64u(m["secret_b64u"], jsonobj.Key(jsonobj.Root, "secret_b64u"), 0)
		})
		if err != nil {
			errorf(stderr, "tpm activate: activation answer: %v", err)
			return nil, exitRejected
		}
		return secret, exitOK
	}
}

// readAnswer parses an attester's JSON answer (an object of at most max
// bytes, nested at most 4 deep) and hands it to read; it returns the parse
// error or the first error read recorded in r.
func readAnswer(body []byte, max int, read func(r *jsonobj.Reader, doc *pohjson.Value)) error {
	doc, err := jsonobj.ParseObject(body, pohjson.ParseOptions{MaxBytes: max, MaxDepth: 4})
	if err != nil {
		return err
	}
	var r jsonobj.Reader
	read(&r, doc)
	return r.Err()
}

// tpmHTTP makes one request and reads at most max bytes of the answer. It
// returns the status, the body and, for a 429, the Retry-After delay.
func tpmHTTP(ctx context.Context, c *http.Client, method, url string, body []byte, max int64) (int, []byte, time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	b, err := bounded.Read(resp.Body, max, "answer")
	if errors.Is(err, bounded.ErrTooLarge) {
		return 0, nil, 0, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	if err != nil {
		return 0, nil, 0, err
	}
	var retry time.Duration
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		retry = time.Duration(secs) * time.Second
	}
	return resp.StatusCode, b, retry, nil
}

// httpStatusText describes a non-success answer: the status and the
// attester's error message, clipped and stripped of control characters.
func httpStatusText(status int, body []byte) string {
	s := fmt.Sprintf("%d %s", status, http.StatusText(status))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg := strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, e.Error)
		if len(msg) > 200 {
			msg = msg[:200]
		}
		s += ": " + msg
	}
	return s
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
		return fail(stderr, "tpm check", exitCannot, err)
	}
	rec, err := tpmcred.ParseCertification(raw)
	if err != nil {
		return fail(stderr, "tpm check", exitRejected, err)
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
