package promptpack

// The disclosure document (format clawea.dev/disclosure/v1): selected
// inputs of a SystemPromptReport v2, each with its content and salt, bound
// to the report hash. An auditor checks each revealed input against the
// report's salted commitment (VerifyDisclosure) and, through the report
// hash, against an execution attestation.
//
// The normative specification is docs/spec/disclosure-v1.md.

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
)

// disclosureVersion is the value of "disclosure_version", the first member of
// every disclosure.
const disclosureVersion = "clawea.dev/disclosure/v1"

// maxDisclosureSize bounds a disclosure document.
const maxDisclosureSize = jcs.MaxBytes

// Errors. Each maps to one reason code (DisclosureCode).
var (
	// errDisclosureMalformed: the disclosure is not v1 syntax (JSON, members,
	// types, order, canonical form).
	errDisclosureMalformed = errors.New("disclosure: malformed disclosure")
	// errDisclosureVersion: disclosure_version is missing or not
	// disclosureVersion.
	errDisclosureVersion = errors.New("disclosure: unknown disclosure version")
	// errDisclosureReport: the report is not a valid SystemPromptReport v2.
	errDisclosureReport = errors.New("disclosure: invalid report")
	// errDisclosureNotSalted: the report is v1; it has no salted commitments.
	errDisclosureNotSalted = errors.New("disclosure: report is v1 (not salted)")
	// errDisclosureReportHash: the disclosure is bound to another report.
	errDisclosureReportHash = errors.New("disclosure: report hash mismatch")
	// errDisclosureUnknownInput: a revealed input is not in the report, or a
	// selector names no input of the pack.
	errDisclosureUnknownInput = errors.New("disclosure: input not in the report")
	// errDisclosureCommitment: a revealed input's content and salt do not give
	// the report's commitment.
	errDisclosureCommitment = errors.New("disclosure: commitment mismatch")
)

// Reason codes (docs/spec/disclosure-v1.md section 6).
const (
	codeMalformed          = "DISCLOSURE_MALFORMED"
	codeUnknownVersion     = "DISCLOSURE_UNKNOWN_VERSION"
	codeReportInvalid      = "REPORT_INVALID"
	codeReportNotSalted    = "REPORT_NOT_SALTED"
	codeReportHashMismatch = "REPORT_HASH_MISMATCH"
	codeUnknownInput       = "INPUT_NOT_IN_REPORT"
	codeCommitmentMismatch = "COMMITMENT_MISMATCH"
)

// DisclosureCode returns the reason code of a parseDisclosure or
// VerifyDisclosure error ("" for nil or an error of another package).
func DisclosureCode(err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{
		{errDisclosureVersion, codeUnknownVersion},
		{errDisclosureMalformed, codeMalformed},
		{errDisclosureNotSalted, codeReportNotSalted},
		{errDisclosureReport, codeReportInvalid},
		{errDisclosureReportHash, codeReportHashMismatch},
		{errDisclosureUnknownInput, codeUnknownInput},
		{errDisclosureCommitment, codeCommitmentMismatch},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// disclosedInput is one revealed input. Content is the exact bytes its
// commitment covers (docs/spec/report-v2.md section 4).
type disclosedInput struct {
	Kind, ID string
	Content  []byte
	Salt     [saltSize]byte
}

// selector returns "kind:id".
func (in *disclosedInput) selector() string { return selectorOf(in.Kind, in.ID) }

// disclosure is a parsed disclosure document.
type disclosure struct {
	// ReportHash is the SHA-256 of the report's JCS bytes.
	ReportHash [32]byte
	// Inputs are sorted by selector, distinct, at least one.
	Inputs []disclosedInput
}

type wireInput struct {
	Content  string `json:"content"`
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	SaltB64u string `json:"salt_b64u"`
}

type wireDisclosure struct {
	DisclosureVersion string      `json:"disclosure_version"`
	ReportHashB64u    string      `json:"report_hash_b64u"`
	Revealed          []wireInput `json:"revealed"`
}

// encode returns the canonical (JCS) bytes of d. It refuses a disclosure
// that parseDisclosure would refuse.
func (d *disclosure) encode() ([]byte, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil", errDisclosureMalformed)
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	w := wireDisclosure{DisclosureVersion: disclosureVersion, ReportHashB64u: b64u.Encode(d.ReportHash[:]), Revealed: make([]wireInput, len(d.Inputs))}
	for i, in := range d.Inputs {
		w.Revealed[i] = wireInput{Content: string(in.Content), ID: in.ID, Kind: in.Kind, SaltB64u: b64u.Encode(in.Salt[:])}
	}
	out, err := jcs.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errDisclosureMalformed, err)
	}
	if len(out) > maxDisclosureSize {
		return nil, fmt.Errorf("%w: %w", errDisclosureMalformed, jsonobj.ErrTooLarge)
	}
	return out, nil
}

// validate checks what parseDisclosure checks on the parsed values.
func (d *disclosure) validate() error {
	if len(d.Inputs) == 0 || len(d.Inputs) > maxReportInputs {
		return fmt.Errorf("%w: $.revealed: 1 to %d inputs", errDisclosureMalformed, maxReportInputs)
	}
	prev := ""
	for i := range d.Inputs {
		in := &d.Inputs[i]
		sel := in.selector()
		if _, _, err := ParseSelector(sel); err != nil {
			return fmt.Errorf("%w: $.revealed[%d]: kind or id", errDisclosureMalformed, i)
		}
		if !utf8.Valid(in.Content) {
			return fmt.Errorf("%w: $.revealed[%d].content: not UTF-8 text", errDisclosureMalformed, i)
		}
		if i > 0 && strings.Compare(sel, prev) <= 0 {
			return fmt.Errorf("%w: $.revealed[%d]: not sorted by kind:id or repeated", errDisclosureMalformed, i)
		}
		prev = sel
	}
	return nil
}

// parseDisclosure reads a disclosure strictly (docs/spec/disclosure-v1.md
// section 4): at most maxDisclosureSize bytes, one JSON object whose
// disclosure_version is checked first, no unknown or missing member, exact
// types, inputs sorted and distinct, and canonical (JCS) bytes. It returns
// nothing on error.
func parseDisclosure(data []byte) (*disclosure, error) {
	if len(data) > maxDisclosureSize {
		return nil, fmt.Errorf("%w: %w", errDisclosureMalformed, jsonobj.ErrTooLarge)
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: maxDisclosureSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDisclosureMalformed, err)
	}
	if v, ok := root.GetString("disclosure_version"); !ok || v != disclosureVersion {
		if !ok {
			return nil, fmt.Errorf("%w: no disclosure_version", errDisclosureVersion)
		}
		return nil, fmt.Errorf("%w: %q", errDisclosureVersion, safetext.Clip(v, 64))
	}
	r := &jsonobj.Reader{}
	top := r.Object(root, jsonobj.Root, map[string]bool{"disclosure_version": true, "report_hash_b64u": true, "revealed": true})
	d := &disclosure{}
	if h := r.B64u(top["report_hash_b64u"], "$.report_hash_b64u", 32); h != nil {
		d.ReportHash = [32]byte(h)
	}
	for i, e := range r.Array(top["revealed"], "$.revealed", 1, maxReportInputs) {
		path := jsonobj.Index("$.revealed", i)
		f := r.Object(e, path, map[string]bool{"content": true, "id": true, "kind": true, "salt_b64u": true})
		var in disclosedInput
		in.Kind, _ = r.Str(f["kind"], path+".kind")
		in.ID, _ = r.Str(f["id"], path+".id")
		in.Content = r.Bytes(f["content"], path+".content")
		if f["content"] != nil && in.Content == nil {
			in.Content = []byte{}
		}
		if s := r.B64u(f["salt_b64u"], path+".salt_b64u", saltSize); s != nil {
			in.Salt = [saltSize]byte(s)
		}
		if r.Err() != nil {
			break
		}
		d.Inputs = append(d.Inputs, in)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errDisclosureMalformed, err)
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	if err := requireJCS(data, errDisclosureMalformed); err != nil {
		return nil, err
	}
	return d, nil
}

// Disclose returns the canonical (JCS) disclosure document of the inputs
// named by selectors ("kind:id") of a v2 rebuild (docs/spec/disclosure-v1.md):
// their contents and salts, bound to the report hash. It holds secrets:
// the caller writes it where only the auditor reads it. Every selector must
// name an input; repeated selectors count once.
func (rb *Rebuilt) Disclose(selectors []string) ([]byte, error) {
	d, err := rb.disclose(selectors)
	if err != nil {
		return nil, err
	}
	defer d.wipe()
	return d.encode()
}

// disclose builds the disclosure of the inputs named by selectors ("kind:id")
// from a v2 rebuild. Every selector must name an input: unknown ones are all
// listed in one errDisclosureUnknownInput error. Repeated selectors count once.
func (rb *Rebuilt) disclose(selectors []string) (*disclosure, error) {
	if rb == nil || rb.Report == nil || rb.Report.ReportVersion != ReportVersion2 {
		return nil, errDisclosureNotSalted
	}
	if len(selectors) == 0 {
		return nil, fmt.Errorf("%w: nothing to reveal", errDisclosureUnknownInput)
	}
	sels := slices.Clone(selectors)
	slices.Sort(sels)
	sels = slices.Compact(sels)
	d := &disclosure{ReportHash: rb.ReportHash}
	var unknown []string
	for _, sel := range sels {
		r, err := rb.reveal(sel)
		if err != nil {
			if errors.Is(err, errUnknownInput) {
				unknown = append(unknown, fmt.Sprintf("%q", safetext.Clip(sel, 80)))
				continue
			}
			return nil, err
		}
		d.Inputs = append(d.Inputs, disclosedInput{Kind: r.Kind, ID: r.ID, Content: r.Content, Salt: r.Salt})
	}
	if len(unknown) > 0 {
		d.wipe()
		return nil, fmt.Errorf("%w: %s (the pack has: %s)", errDisclosureUnknownInput, strings.Join(unknown, ", "), strings.Join(rb.inputSelectors(), " "))
	}
	// Selectors sort as their kind:id strings, which is the order
	// parseDisclosure requires (Reveal returns the canonical kind and id of
	// each).
	slices.SortFunc(d.Inputs, func(a, b disclosedInput) int { return strings.Compare(a.selector(), b.selector()) })
	return d, nil
}

// wipe zeroes the revealed contents and salts.
func (d *disclosure) wipe() {
	if d == nil {
		return
	}
	for i := range d.Inputs {
		clear(d.Inputs[i].Content)
		d.Inputs[i].Salt = [saltSize]byte{}
	}
}

// DescribeDisclosure reads a disclosure document strictly, as
// VerifyDisclosure does, and returns the report hash it names and what it
// reveals (names and sizes, never contents), checking nothing against a
// report: it is for inspecting a file. The parsed contents are wiped.
func DescribeDisclosure(data []byte) (reportHash [32]byte, revealed []RevealedInput, err error) {
	d, err := parseDisclosure(data)
	if err != nil {
		return reportHash, nil, err
	}
	defer d.wipe()
	for _, in := range d.Inputs {
		revealed = append(revealed, RevealedInput{Kind: in.Kind, ID: in.ID, ContentBytes: len(in.Content), Selector: in.selector()})
	}
	return d.ReportHash, revealed, nil
}

// DisclosureResult is what VerifyDisclosure established.
type DisclosureResult struct {
	// ReportHashB64u is the verified report's hash, to which the
	// disclosure is bound.
	ReportHashB64u string
	// SystemPromptHashB64u is the report's final prompt hash.
	SystemPromptHashB64u string
	// Revealed lists the verified inputs, in disclosure order.
	Revealed []RevealedInput
}

// RevealedInput names one verified input (without its content).
type RevealedInput struct {
	Kind         string `json:"kind"`
	ID           string `json:"id"`
	ContentBytes int    `json:"content_bytes"`
	// Selector is "kind:id", the input's name in a disclosure request
	// (Rebuilt.Disclose).
	Selector string `json:"-"`
}

// VerifyDisclosure checks a disclosure against a SystemPromptReport v2, in this
// order: the report parses (parseReportV2), the disclosure
// parses, the disclosure's report hash is the SHA-256 of the report bytes,
// and every revealed input is in the report and its content and salt give
// the report's commitment. It returns what the disclosure revealed (names and
// sizes, never contents); the parsed contents are wiped.
func VerifyDisclosure(report, disclosure []byte) (*DisclosureResult, error) {
	rep, err := parseReportV2(report)
	if err != nil {
		if errors.Is(err, errNotSalted) {
			return nil, errDisclosureNotSalted
		}
		return nil, fmt.Errorf("%w: %w", errDisclosureReport, err)
	}
	d, err := parseDisclosure(disclosure)
	if err != nil {
		return nil, err
	}
	defer d.wipe()
	if subtle.ConstantTimeCompare(d.ReportHash[:], rep.Hash[:]) != 1 {
		return nil, fmt.Errorf("%w: the disclosure names report %s, the report's hash is %s", errDisclosureReportHash, b64u.Encode(d.ReportHash[:]), b64u.Encode(rep.Hash[:]))
	}
	res := &DisclosureResult{ReportHashB64u: b64u.Encode(rep.Hash[:]), SystemPromptHashB64u: rep.SystemPromptHashB64u}
	for i := range d.Inputs {
		in := &d.Inputs[i]
		want, ok := rep.Commitments[in.selector()]
		if !ok {
			return nil, fmt.Errorf("%w: %q", errDisclosureUnknownInput, safetext.Clip(in.selector(), 80))
		}
		got := inputCommitment(in.Salt, in.Kind, in.ID, in.Content)
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return nil, fmt.Errorf("%w: %q", errDisclosureCommitment, safetext.Clip(in.selector(), 80))
		}
		res.Revealed = append(res.Revealed, RevealedInput{Kind: in.Kind, ID: in.ID, ContentBytes: len(in.Content), Selector: in.selector()})
	}
	return res, nil
}
