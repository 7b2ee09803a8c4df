// Package disclosure implements the disclosure document (format
// clawea.dev/disclosure/v1): selected inputs of a SystemPromptReport v2,
// each with its content and salt, bound to the report hash. An auditor
// checks each revealed input against the report's salted commitment
// (Verify) and, through the report hash, against an execution attestation.
//
// The normative specification is docs/spec/disclosure-v1.md.
package disclosure

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
)

// version is the value of "disclosure_version", the first member of every
// disclosure.
const version = "clawea.dev/disclosure/v1"

// MaxSize bounds a disclosure document.
const MaxSize = jcs.MaxBytes

// Errors. Each maps to one reason code (Code).
var (
	// errMalformed: the disclosure is not v1 syntax (JSON, members, types,
	// order, canonical form).
	errMalformed = errors.New("disclosure: malformed disclosure")
	// errUnknownVersion: disclosure_version is missing or not version.
	errUnknownVersion = errors.New("disclosure: unknown disclosure version")
	// errReport: the report is not a valid SystemPromptReport v2.
	errReport = errors.New("disclosure: invalid report")
	// ErrNotSalted: the report is v1; it has no salted commitments.
	ErrNotSalted = errors.New("disclosure: report is v1 (not salted)")
	// errReportHash: the disclosure is bound to another report.
	errReportHash = errors.New("disclosure: report hash mismatch")
	// ErrUnknownInput: a revealed input is not in the report, or a
	// selector names no input of the pack.
	ErrUnknownInput = errors.New("disclosure: input not in the report")
	// errCommitment: a revealed input's content and salt do not give the
	// report's commitment.
	errCommitment = errors.New("disclosure: commitment mismatch")
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

// Code returns the reason code of a Parse or Verify error ("" for nil or
// an error of another package).
func Code(err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{
		{errUnknownVersion, codeUnknownVersion},
		{errMalformed, codeMalformed},
		{ErrNotSalted, codeReportNotSalted},
		{errReport, codeReportInvalid},
		{errReportHash, codeReportHashMismatch},
		{ErrUnknownInput, codeUnknownInput},
		{errCommitment, codeCommitmentMismatch},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// Input is one revealed input. Content is the exact bytes its commitment
// covers (docs/spec/report-v2.md section 4).
type Input struct {
	Kind, ID string
	Content  []byte
	Salt     [promptpack.SaltSize]byte
}

// Selector returns "kind:id".
func (in *Input) Selector() string { return promptpack.Selector(in.Kind, in.ID) }

// Disclosure is a parsed disclosure document.
type Disclosure struct {
	// ReportHash is the SHA-256 of the report's JCS bytes.
	ReportHash [32]byte
	// Inputs are sorted by selector, distinct, at least one.
	Inputs []Input
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

// Encode returns the canonical (JCS) bytes of d. It refuses a disclosure
// that Parse would refuse.
func (d *Disclosure) Encode() ([]byte, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil", errMalformed)
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	w := wireDisclosure{DisclosureVersion: version, ReportHashB64u: b64u.Encode(d.ReportHash[:]), Revealed: make([]wireInput, len(d.Inputs))}
	for i, in := range d.Inputs {
		w.Revealed[i] = wireInput{Content: string(in.Content), ID: in.ID, Kind: in.Kind, SaltB64u: b64u.Encode(in.Salt[:])}
	}
	raw, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	out, err := jcs.Canonicalize(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if len(out) > MaxSize {
		return nil, fmt.Errorf("%w: %w", errMalformed, jsonobj.ErrTooLarge)
	}
	return out, nil
}

// validate checks what Parse checks on the parsed values.
func (d *Disclosure) validate() error {
	if len(d.Inputs) == 0 || len(d.Inputs) > promptpack.MaxReportInputs {
		return fmt.Errorf("%w: $.revealed: 1 to %d inputs", errMalformed, promptpack.MaxReportInputs)
	}
	prev := ""
	for i := range d.Inputs {
		in := &d.Inputs[i]
		sel := in.Selector()
		if _, _, err := promptpack.ParseSelector(sel); err != nil {
			return fmt.Errorf("%w: $.revealed[%d]: kind or id", errMalformed, i)
		}
		if !utf8.Valid(in.Content) {
			return fmt.Errorf("%w: $.revealed[%d].content: not UTF-8 text", errMalformed, i)
		}
		if i > 0 && strings.Compare(sel, prev) <= 0 {
			return fmt.Errorf("%w: $.revealed[%d]: not sorted by kind:id or repeated", errMalformed, i)
		}
		prev = sel
	}
	return nil
}

// Parse reads a disclosure strictly (docs/spec/disclosure-v1.md section
// 4): at most MaxSize bytes, one JSON object whose disclosure_version is
// checked first, no unknown or missing member, exact types, inputs sorted
// and distinct, and canonical (JCS) bytes. It returns nothing on error.
func Parse(data []byte) (*Disclosure, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %w", errMalformed, jsonobj.ErrTooLarge)
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: MaxSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if v, ok := root.GetString("disclosure_version"); !ok || v != version {
		if !ok {
			return nil, fmt.Errorf("%w: no disclosure_version", errUnknownVersion)
		}
		return nil, fmt.Errorf("%w: %q", errUnknownVersion, safetext.Clip(v, 64))
	}
	r := &jsonobj.Reader{}
	top := r.Object(root, jsonobj.Root, map[string]bool{"disclosure_version": true, "report_hash_b64u": true, "revealed": true})
	d := &Disclosure{}
	if h := r.B64u(top["report_hash_b64u"], "$.report_hash_b64u", 32); h != nil {
		d.ReportHash = [32]byte(h)
	}
	for i, e := range r.Array(top["revealed"], "$.revealed", 1, promptpack.MaxReportInputs) {
		path := jsonobj.Index("$.revealed", i)
		f := r.Object(e, path, map[string]bool{"content": true, "id": true, "kind": true, "salt_b64u": true})
		var in Input
		in.Kind, _ = r.Str(f["kind"], path+".kind")
		in.ID, _ = r.Str(f["id"], path+".id")
		in.Content = r.Bytes(f["content"], path+".content")
		if f["content"] != nil && in.Content == nil {
			in.Content = []byte{}
		}
		if s := r.B64u(f["salt_b64u"], path+".salt_b64u", promptpack.SaltSize); s != nil {
			in.Salt = [promptpack.SaltSize]byte(s)
		}
		if r.Err() != nil {
			break
		}
		d.Inputs = append(d.Inputs, in)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	canon, err := jcs.Canonicalize(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if !bytes.Equal(canon, data) {
		return nil, fmt.Errorf("%w: not in JCS canonical form", errMalformed)
	}
	return d, nil
}

// Create builds the disclosure of the inputs named by selectors ("kind:id")
// from a v2 rebuild. Every selector must name an input: unknown ones are
// all listed in one ErrUnknownInput error. Repeated selectors count once.
func Create(rb *promptpack.Rebuilt, selectors []string) (*Disclosure, error) {
	if rb == nil || rb.Report == nil || rb.Report.ReportVersion != promptpack.ReportVersion2 {
		return nil, ErrNotSalted
	}
	if len(selectors) == 0 {
		return nil, fmt.Errorf("%w: nothing to reveal", ErrUnknownInput)
	}
	sels := slices.Clone(selectors)
	slices.Sort(sels)
	sels = slices.Compact(sels)
	d := &Disclosure{ReportHash: rb.ReportHash}
	var unknown []string
	for _, sel := range sels {
		r, err := rb.Reveal(sel)
		if err != nil {
			if errors.Is(err, promptpack.ErrUnknownInput) {
				unknown = append(unknown, fmt.Sprintf("%q", safetext.Clip(sel, 80)))
				continue
			}
			return nil, err
		}
		d.Inputs = append(d.Inputs, Input{Kind: r.Kind, ID: r.ID, Content: r.Content, Salt: r.Salt})
	}
	if len(unknown) > 0 {
		d.Wipe()
		return nil, fmt.Errorf("%w: %s (the pack has: %s)", ErrUnknownInput, strings.Join(unknown, ", "), strings.Join(rb.InputSelectors(), " "))
	}
	// Selectors sort as their kind:id strings, which is the order Parse
	// requires (Reveal returns the canonical kind and id of each).
	slices.SortFunc(d.Inputs, func(a, b Input) int { return strings.Compare(a.Selector(), b.Selector()) })
	return d, nil
}

// Wipe zeroes the revealed contents and salts.
func (d *Disclosure) Wipe() {
	if d == nil {
		return
	}
	for i := range d.Inputs {
		clear(d.Inputs[i].Content)
		d.Inputs[i].Salt = [promptpack.SaltSize]byte{}
	}
}

// Result is what Verify established.
type Result struct {
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
}

// Verify checks a disclosure against a SystemPromptReport v2, in this
// order: the report parses (promptpack.ParseReportV2), the disclosure
// parses, the disclosure's report hash is the SHA-256 of the report bytes,
// and every revealed input is in the report and its content and salt give
// the report's commitment. It returns the verified disclosure too.
func Verify(report, disclosure []byte) (*Result, *Disclosure, error) {
	rep, err := promptpack.ParseReportV2(report)
	if err != nil {
		if errors.Is(err, promptpack.ErrNotSalted) {
			return nil, nil, ErrNotSalted
		}
		return nil, nil, fmt.Errorf("%w: %w", errReport, err)
	}
	d, err := Parse(disclosure)
	if err != nil {
		return nil, nil, err
	}
	if subtle.ConstantTimeCompare(d.ReportHash[:], rep.Hash[:]) != 1 {
		return nil, nil, fmt.Errorf("%w: the disclosure names report %s, the report's hash is %s", errReportHash, b64u.Encode(d.ReportHash[:]), b64u.Encode(rep.Hash[:]))
	}
	res := &Result{ReportHashB64u: b64u.Encode(rep.Hash[:]), SystemPromptHashB64u: rep.SystemPromptHashB64u}
	for i := range d.Inputs {
		in := &d.Inputs[i]
		want, ok := rep.Commitments[in.Selector()]
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q", ErrUnknownInput, safetext.Clip(in.Selector(), 80))
		}
		got := promptpack.InputCommitment(in.Salt, in.Kind, in.ID, in.Content)
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return nil, nil, fmt.Errorf("%w: %q", errCommitment, safetext.Clip(in.Selector(), 80))
		}
		res.Revealed = append(res.Revealed, RevealedInput{Kind: in.Kind, ID: in.ID, ContentBytes: len(in.Content)})
	}
	return res, d, nil
}
