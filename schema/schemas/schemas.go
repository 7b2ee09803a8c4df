// Package schemas embeds the JSON Schemas (draft 2020-12) this project
// validates against: the PoH schemas, byte-identical to the public
// Proof-of-Harness repository (see poh/SOURCE.md), and clawea's own schemas.
// Validation uses github.com/santhosh-tekuri/jsonschema/v6 with format
// assertions on.
package schemas

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/clawea/attester/schema/pohjson"
)

//go:embed poh/*.json clawea/*.json
var files embed.FS

// Schema IDs. The IDs of the envelope and tool receipt schemas that only
// schema/poh validates against are declared there.
const (
	proofBundleV1                  = "https://schemas.clawbureau.org/claw.poh.proof_bundle.v1.json"
	ExecutionAttestationEnvelopeV1 = "https://schemas.clawbureau.org/claw.poh.execution_attestation_envelope.v1.json"
	executionAttestationV1         = "https://schemas.clawbureau.org/claw.poh.execution_attestation.v1.json"
	eventChainV1                   = "https://schemas.clawbureau.org/claw.poh.event_chain.v1.json"
	PromptPackV1                   = "https://schemas.clawbureau.org/claw.poh.prompt_pack.v1.json"
	PoHSystemPromptReportV1        = "https://schemas.clawbureau.org/claw.poh.system_prompt_report.v1.json"
	urmv1                          = "https://schemas.clawbureau.org/claw.poh.urm.v1.json"
	coSignatureV1                  = "https://schemas.clawbureau.org/claw.poh.co_signature.v1.json"
	selectiveDisclosureV1          = "https://schemas.clawbureau.org/claw.poh.selective_disclosure.v1.json"
	// SystemPromptReportV1 is clawea's hash-first SystemPromptReport.v1.
	SystemPromptReportV1 = "https://schemas.clawea.dev/clawea.system_prompt_report.v1.json"
	// AdmissionPolicyV1 is clawea's admission policy
	// (docs/spec/admission-policy-v1.md).
	AdmissionPolicyV1 = "https://schemas.clawea.dev/clawea.admission_policy.v1.json"
	// SystemPromptReportV2 is clawea's SystemPromptReport v2, whose
	// per-input commitments are salted (docs/spec/report-v2.md).
	SystemPromptReportV2 = "https://schemas.clawea.dev/clawea.system_prompt_report.v2.json"
)

// maxDocumentBytes bounds a validated document.
const maxDocumentBytes = 16 << 20

// Errors.
var (
	// errInvalid: the document does not satisfy the schema.
	errInvalid = errors.New("schemas: document does not match schema")
	// errUnknownSchema: no embedded schema has that ID.
	errUnknownSchema = errors.New("schemas: unknown schema id")
)

// ValidationError reports the first failing location.
type ValidationError struct {
	SchemaID string
	// Location is the JSON pointer of the failing instance value.
	Location string
	Msg      string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("schemas: %s: at %q: %s", path.Base(e.SchemaID), e.Location, e.Msg)
}

func (e *ValidationError) Unwrap() error { return errInvalid }

type compiled struct {
	byID map[string]*jsonschema.Schema
}

// failClosedLoader resolves every schema the embedded set does not contain
// to `false`, so documents that use them are refused.
type failClosedLoader struct{}

func (failClosedLoader) Load(string) (any, error) { return false, nil }

var load = sync.OnceValues(func() (*compiled, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.UseLoader(failClosedLoader{})
	c.UseRegexpEngine(compilePattern)
	var ids []string
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		raw, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		m, ok := doc.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not an object", p)
		}
		id, _ := m["$id"].(string)
		if id == "" {
			return fmt.Errorf("%s: no $id", p)
		}
		if err := c.AddResource(id, doc); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := &compiled{byID: map[string]*jsonschema.Schema{}}
	for _, id := range ids {
		s, err := c.Compile(id)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", id, err)
		}
		out.byID[id] = s
	}
	return out, nil
})

// ids lists the embedded schema IDs, sorted.
func ids() []string {
	c, err := load()
	if err != nil {
		return nil
	}
	ids := make([]string, 0, len(c.byID))
	for id := range c.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// source returns the embedded bytes of a schema file, e.g. "poh/urm.v1.json".
func source(name string) ([]byte, error) { return files.ReadFile(name) }

// Validate checks doc (JSON text) against the schema with the given ID. The
// document must also be strict JSON (no duplicate keys, valid UTF-8).
func Validate(schemaID string, doc []byte) error {
	s, err := schema(schemaID)
	if err != nil {
		return err
	}
	v, err := pohjson.ParseWith(doc, pohjson.ParseOptions{MaxBytes: maxDocumentBytes, AllowFloats: true})
	if err != nil {
		return &ValidationError{SchemaID: schemaID, Location: "", Msg: err.Error()}
	}
	return validate(s, schemaID, v)
}

// ValidateValue is Validate for a document the caller has already parsed
// strictly (pohjson), so that it is not decoded a second time. A value that
// Validate would refuse as JSON (a duplicate key) has no strict parse, so
// the two agree on every document.
func ValidateValue(schemaID string, v *pohjson.Value) error {
	s, err := schema(schemaID)
	if err != nil {
		return err
	}
	return validate(s, schemaID, v)
}

// schema returns the compiled schema with the given ID.
func schema(schemaID string) (*jsonschema.Schema, error) {
	c, err := load()
	if err != nil {
		return nil, fmt.Errorf("schemas: embedded schemas do not compile: %w", err)
	}
	s, ok := c.byID[schemaID]
	if !ok {
		return nil, fmt.Errorf("%w: %q", errUnknownSchema, schemaID)
	}
	return s, nil
}

func validate(s *jsonschema.Schema, schemaID string, v *pohjson.Value) error {
	// The strict parse is the only parse: its value, as encoding/json with
	// UseNumber would decode it (FuzzInstance checks they agree), is the
	// instance validated.
	if err := s.Validate(v.Interface()); err != nil {
		if ve, ok := errors.AsType[*jsonschema.ValidationError](err); ok {
			leaf := ve
			for len(leaf.Causes) > 0 {
				leaf = leaf.Causes[0]
			}
			return &ValidationError{SchemaID: schemaID, Location: "/" + strings.Join(leaf.InstanceLocation, "/"), Msg: leaf.ErrorKind.LocalizedString(message.NewPrinter(language.English))}
		}
		return &ValidationError{SchemaID: schemaID, Msg: err.Error()}
	}
	return nil
}
