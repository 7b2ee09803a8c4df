package schemas

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/pohjson"
)

var shared = filepath.Join("..", "..", "..", "shared", "conformance", "poh")

func sharedDir(t *testing.T, sub string) string {
	t.Helper()
	d := filepath.Join(shared, sub)
	if _, err := os.Stat(d); err != nil {
		citest.SkipOrFail(t, "shared conformance data not present: %v", err)
	}
	return d
}

func TestCompileAll(t *testing.T) {
	ids := ids()
	if len(ids) != 21 {
		t.Fatalf("compiled %d schemas, want 21: %v", len(ids), ids)
	}
}

func TestSchemasMatchConformance(t *testing.T) {
	dir := sharedDir(t, "schemas")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		want := testfile.Read(t, filepath.Join(dir, e.Name()))
		got, err := source("poh/" + e.Name())
		if err != nil {
			t.Fatalf("%s not embedded: %v", e.Name(), err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the conformance copy", e.Name())
		}
	}
}

// proofBundleEnvelopeV1 is the ID of the schema the shared vectors follow
// (schema/poh validates against it).
const proofBundleEnvelopeV1 = "https://schemas.clawbureau.org/claw.poh.proof_bundle_envelope.v1.json"

func TestPassingBundleValidates(t *testing.T) {
	raw := testfile.Read(t, filepath.Join(sharedDir(t, "vectors"), "proof_bundle_pass.v1.json"))
	if err := Validate(proofBundleEnvelopeV1, raw); err != nil {
		t.Fatalf("pass vector: %v", err)
	}
}

func TestRejects(t *testing.T) {
	raw := testfile.Read(t, filepath.Join(sharedDir(t, "vectors"), "proof_bundle_pass.v1.json"))
	for name, doc := range map[string][]byte{
		"extra field": bytes.Replace(raw, []byte(`"bundle_version": "1",`), []byte(`"bundle_version": "1", "x": 1,`), 1),
		"bad version": bytes.Replace(raw, []byte(`"bundle_version": "1"`), []byte(`"bundle_version": "2"`), 1),
		"bad date":    bytes.Replace(raw, []byte(`"2026-02-12T00:00:02.000Z"`), []byte(`"yesterday"`), 1),
		"duplicate":   bytes.Replace(raw, []byte(`"bundle_version": "1",`), []byte(`"bundle_version": "1", "bundle_version": "1",`), 1),
		"not json":    []byte(`{`),
		"wrong type":  []byte(`[]`),
	} {
		err := Validate(proofBundleEnvelopeV1, doc)
		if _, ok := errors.AsType[*ValidationError](err); !errors.Is(err, errInvalid) || !ok {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
		// The same document parsed by the caller is refused the same way.
		if v, perr := pohjson.ParseWith(doc, pohjson.ParseOptions{AllowFloats: true}); perr == nil {
			if verr := ValidateValue(proofBundleEnvelopeV1, v); verr == nil || verr.Error() != err.Error() {
				t.Errorf("%s: ValidateValue: %v, Validate: %v", name, verr, err)
			}
		}
	}
	if v, err := pohjson.Parse(raw); err != nil || ValidateValue(proofBundleEnvelopeV1, v) != nil {
		t.Errorf("pass vector: ValidateValue refuses it (%v)", err)
	}
	if err := Validate("https://example.com/nope.json", []byte(`{}`)); !errors.Is(err, errUnknownSchema) {
		t.Errorf("unknown schema: %v", err)
	}
}

func TestUnshippedRefFailsClosed(t *testing.T) {
	// A gateway receipt using an optional structure whose schema is not
	// shipped (model_identity is shipped; receipt_binding too; the kinematic
	// fingerprint is not) must be refused.
	doc := []byte(`{"receipt_version":"1","receipt_id":"r","gateway_id":"g","provider":"p","model":"m","request_hash_b64u":"AAAAAAAA","response_hash_b64u":"AAAAAAAA","tokens_input":1,"tokens_output":1,"latency_ms":1,"timestamp":"2026-02-12T00:00:00.000Z","kinematic_fingerprint":{}}`)
	if err := Validate("https://schemas.clawbureau.org/claw.poh.gateway_receipt.v1.json", doc); !errors.Is(err, errInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

func TestSystemPromptReportSchema(t *testing.T) {
	h := "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
	ok := []byte(`{"report_version":"1","harness":{"id":"openclaw","version":"2026.2.7","commit":"04c9b1de"},"prompt_mode":"full","builder":{"name":"buildAgentSystemPrompt","builder_version":"1"},"recipe":{"id":"openclaw-sig","version":"1"},"final":{"system_prompt_hash_b64u":"` + h + `","system_prompt_chars":10},"inputs":{"params_hash_b64u":"` + h + `","templates":[{"name":"identity.txt","hash":"sha256:` + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" + `"}],"resolved_tool_names_hash_b64u":"` + h + `","tool_schemas_hash_b64u":"` + h + `","tool_summaries_hash_b64u":"` + h + `","bootstrap":[{"path_hint":"AGENTS.md","content_hash_b64u":"` + h + `","chars":1,"truncated":false,"max_chars":20000}]}}`)
	if err := Validate(SystemPromptReportV1, ok); err != nil {
		t.Fatalf("valid report: %v", err)
	}
	for name, doc := range map[string][]byte{
		"short hash":  bytes.Replace(ok, []byte(h+`","system_prompt_chars`), []byte(`AAAA","system_prompt_chars`), 1),
		"unknown key": bytes.Replace(ok, []byte(`"prompt_mode"`), []byte(`"extra":1,"prompt_mode"`), 1),
		"both paths":  bytes.Replace(ok, []byte(`"path_hint":"AGENTS.md",`), []byte(`"path_hint":"AGENTS.md","path_hash_b64u":"`+h+`",`), 1),
		"version 2":   bytes.Replace(ok, []byte(`"report_version":"1"`), []byte(`"report_version":"2"`), 1),
		"float chars": bytes.Replace(ok, []byte(`"system_prompt_chars":10`), []byte(`"system_prompt_chars":1.5`), 1),
	} {
		if err := Validate(SystemPromptReportV1, doc); !errors.Is(err, errInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}
