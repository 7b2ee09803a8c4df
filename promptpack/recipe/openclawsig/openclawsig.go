// Package openclawsig implements the "openclaw-sig" prompt recipe: it
// rebuilds, byte for byte, the system prompt that the OpenClaw
// prompt-signing branch (openclaw/openclaw PR #11119) builds.
//
// The package holds only the assembly rules. Every piece of harness text
// (templates, the strings the builder hardcodes, the built-in tool
// summaries) is data in a Harness, loaded at run time from a prompt pack or
// a directory and checked against trusted template hashes before use. The
// behaviour reproduced is specified in the conformance folder's RECIPE.md
// and in docs/spec/recipe-openclaw-sig.md.
//
// The flow is: NewHarness or LoadHarnessDir, then Render with the trusted
// template hashes and the params, which checks the templates before it
// parses the params or renders anything.
package openclawsig

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/safetext"
)

const (
	// ID is the recipe name carried in prompt packs.
	ID = "openclaw-sig"
	// Version is the version of the assembly rules.
	Version = "1"
)

// Size limits. Every input is bounded before it is parsed.
const (
	maxTemplateSize     = 256 << 10 // one template file
	MaxTemplates        = 128       // template files in a harness
	maxSigSize          = 16 << 10  // one .sig.json or config.json
	maxDataFileSize     = 1 << 20   // hardcoded-literals.json, core-tool-summaries.json
	maxHarnessSize      = 8 << 20   // all harness files together
	MaxParamsSize       = 16 << 20  // the params JSON
	maxNameLen          = 128       // template file name
	maxErrorKeyLen      = 64        // key bytes quoted in an error
	maxJSONContainerLen = 1 << 20   // entries in one JSON array or object
)

// Sentinel errors. Errors returned by this package wrap one of them.
var (
	// ErrInvalidHarness: harness data is malformed, oversized or
	// inconsistent (a bad file name, a sig that does not parse, a missing
	// or unknown literal id, invalid UTF-8 in a template).
	ErrInvalidHarness = errors.New("openclawsig: invalid harness")
	// ErrTemplateMissing: a template that the recipe needs is absent.
	ErrTemplateMissing = errors.New("openclawsig: template missing")
	// ErrTemplateUnsigned: a template has no sig.
	ErrTemplateUnsigned = errors.New("openclawsig: template unsigned")
	// ErrTemplateModified: a template's bytes do not match its sig's hash
	// or contentLength.
	ErrTemplateModified = errors.New("openclawsig: template modified")
	// ErrTemplateUntrusted: a template's sig hash is not the trusted hash
	// for that template name.
	ErrTemplateUntrusted = errors.New("openclawsig: template untrusted")

	// ErrInvalidParams: the params document was refused. ParseParams
	// returns it as the Doc of a *confdoc.ConfigError that names the JSON
	// path and matches a jsonobj sentinel (or pohjson.ErrDuplicateKey).
	ErrInvalidParams = errors.New("openclawsig: invalid params")
)

// TemplateError reports a template that failed a check. Err is one of the
// ErrTemplate* sentinels.
type TemplateError struct {
	Name string // template file name, e.g. "identity.txt"
	Err  error
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("%v: %q", e.Err, e.Name)
}

func (e *TemplateError) Unwrap() error { return e.Err }

// quoteKey bounds an input key before it goes into an error.
func quoteKey(k string) string { return safetext.Clip(k, maxErrorKeyLen) }
