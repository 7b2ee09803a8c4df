package promptpack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/fuzzcheck"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/schemas"
	"github.com/clawea/attester/sealed"
)

// conformanceDir is the shared conformance folder beside the checkout.
var conformanceDir = filepath.Join("..", "..", "shared", "conformance", "openclaw-sig")

func requireConformance(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(conformanceDir, "vectors", "INDEX.tsv")); err != nil {
		citest.SkipOrFail(tb, "conformance data not available: %v", err)
	}
}

func readParams(tb testing.TB, name string) []byte {
	tb.Helper()
	requireConformance(tb)
	return testfile.Read(tb, filepath.Join(conformanceDir, "vectors", name+".params.json"))
}

func buildVector(tb testing.TB, name string, opts BuildOptions) *Pack {
	tb.Helper()
	p, err := Build(readParams(tb, name), conformanceDir, openclawsig.ID, opts)
	if err != nil {
		tb.Fatalf("Build(%s): %v", name, err)
	}
	return p
}

// reparse encodes p, parses the encoding and checks that the parsed pack
// encodes to the same bytes; it returns the encoding and the parsed pack.
func reparse(tb testing.TB, p *Pack) ([]byte, *Pack) {
	tb.Helper()
	enc, err := p.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	q, ok := fuzzcheck.RoundTrip(tb, enc, Parse, (*Pack).Encode)
	if !ok {
		_, err := Parse(enc)
		tb.Fatalf("Parse of an encoded pack: %v", err)
	}
	return enc, q
}

// selfRebuild rebuilds p trusting its own template hashes.
func selfRebuild(tb testing.TB, p *Pack) *Rebuilt {
	tb.Helper()
	rb, err := p.Rebuild(selfTrusted(tb, p))
	if err != nil {
		tb.Fatalf("Rebuild: %v", err)
	}
	return rb
}

func selfTrusted(tb testing.TB, p *Pack) map[string]string {
	tb.Helper()
	t, err := p.SigHashes()
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// TestVectors runs every openclaw-sig vector through Build, Encode, Parse
// and Rebuild, and checks the prompt against INDEX.tsv and the report and
// PoH commitments against their schemas.
func TestVectors(t *testing.T) {
	requireConformance(t)
	index := testfile.TSV(t, filepath.Join(conformanceDir, "vectors", "INDEX.tsv"), 3) // name, sha256, bytes
	if len(index) < 30 {
		t.Fatalf("INDEX.tsv has only %d vectors", len(index))
	}
	for _, v := range index {
		name, wantSHA, wantBytes := v[0], v[1], v[2]
		t.Run(name, func(t *testing.T) {
			enc, q := reparse(t, buildVector(t, name, BuildOptions{}))
			if !bytes.HasPrefix(enc, []byte(`{"pack_version":"`+packVersion+`"`)) {
				t.Fatalf("pack does not start with its version: %.60s", enc)
			}
			rb := selfRebuild(t, q)
			sum := sha256.Sum256(rb.Prompt)
			if hex.EncodeToString(sum[:]) != wantSHA || strconv.Itoa(len(rb.Prompt)) != wantBytes {
				t.Fatalf("prompt sha256 %x (%d bytes), want %s (%s)", sum, len(rb.Prompt), wantSHA, wantBytes)
			}
			if rb.PromptHashB64u() != b64u.Encode(sum[:]) {
				t.Fatal("report prompt hash is not the prompt's")
			}
			if err := schemas.Validate(schemas.SystemPromptReportV1, rb.ReportJCS); err != nil {
				t.Fatalf("report does not validate: %v", err)
			}
			if got := sha256.Sum256(rb.ReportJCS); got != rb.ReportHash {
				t.Fatal("report hash is not SHA-256 of the JCS bytes")
			}
			canon, err := jcs.Canonicalize(rb.ReportJCS)
			if err != nil || !bytes.Equal(canon, rb.ReportJCS) {
				t.Fatal("report bytes are not canonical")
			}
			if rb.Mode != q.PromptMode || rb.Report.PromptMode != q.PromptMode {
				t.Fatal("mode differs")
			}
			if id, _ := q.id(); id != rb.PackID || !strings.HasPrefix(id, packIDPrefix) {
				t.Fatalf("pack id %q vs %q", id, rb.PackID)
			}
			_, pp, err := rb.promptPack()
			if err != nil {
				t.Fatalf("PromptPack: %v", err)
			}
			if err := schemas.Validate(schemas.PromptPackV1, pp); err != nil {
				t.Fatal(err)
			}
			_, spr, err := rb.SystemPromptReportCommitment(ReportCommitmentInput{
				ReportID: "spr_1", RunID: "run_1", AgentDID: "did:key:z6MkneMkZqwqRiU5mJzSG3kDwzt9P8C59N4NGTfBLfSGE7c7",
				IssuedAt: time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC), Calls: []CallRef{{EventID: "evt_1"}, {EventID: "evt_2", Model: "m"}},
			})
			if err != nil {
				t.Fatalf("SystemPromptReportCommitment: %v", err)
			}
			if !bytes.Contains(spr, []byte(`"rendered_system_prompt_hash_b64u":"`+rb.PromptHashB64u()+`"`)) {
				t.Fatal("commitment does not carry the prompt hash")
			}
		})
	}
}

// The golden report hash of the `full` vector with the default build
// options. It changes only if the report format, the pack format defaults
// or the shared data change; each change needs a spec review.
const (
	goldenFullReportHash = "GCJGzpEv_VGr-tDuCmtgnmM9V4QlPeGHlEbpMxSH-Qc"
	goldenFullPackID     = "pack:7UVnSAByxNL_FbWKuxA2-Zvvw1DKS_9a-zu7KAnkzOI"
)

func TestReportGolden(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "full", BuildOptions{})
	rb := selfRebuild(t, p)
	if got := rb.ReportHashB64u(); got != goldenFullReportHash {
		t.Errorf("report hash %s, want %s\nreport: %s", got, goldenFullReportHash, rb.ReportJCS)
	}
	if rb.PackID != goldenFullPackID {
		t.Errorf("pack id %s, want %s", rb.PackID, goldenFullPackID)
	}
	// Stable across rebuilds and re-parses.
	enc, _ := p.Encode()
	q, err := Parse(enc)
	if err != nil {
		t.Fatal(err)
	}
	rb2, err := q.Rebuild(selfTrusted(t, q))
	if err != nil || rb2.ReportHash != rb.ReportHash {
		t.Fatalf("report hash not stable: %v", err)
	}
	in := rb.Report.Inputs
	if len(in.Bootstrap) != 3 || in.Bootstrap[0].PathHint != "AGENTS.md" || in.Bootstrap[2].Chars != 0 {
		t.Fatalf("bootstrap entries: %+v", in.Bootstrap)
	}
	if in.ExtraSystemPromptHashB64u == "" || in.SkillsPromptHashB64u == "" || in.RuntimeLineHashB64u == "" ||
		in.SandboxContextHashB64u == "" || in.TimeContextHashB64u == "" || in.OwnerNumbersHashB64u == "" {
		t.Fatalf("per-section hashes missing: %+v", in)
	}
	if in.ParamsHashB64u != b64u.SHA256(readParams(t, "full")) {
		t.Fatal("params hash is not over the exact params bytes")
	}
}

// TestReportInputsChange: every committed input moves the report hash.
func TestReportInputsChange(t *testing.T) {
	requireConformance(t)
	base := buildVector(t, "full", BuildOptions{})
	rb0 := selfRebuild(t, base)
	mc := int64(20000)
	variants := map[string]BuildOptions{
		"tool schemas": {ToolSchemas: []byte(`{"read":{"type":"object","properties":{"path":{"type":"string"}}}}`)},
		"skills env":   {SkillsEnvOverrides: []byte(`{"API_BASE":"https://example.test"}`)},
		"raw context":  {RawContextFiles: map[string]rawContextFile{"AGENTS.md": {RawContentHash: sha256.Sum256([]byte("x")), Truncated: true, MaxChars: &mc}}},
		"provenance":   {Provenance: &Provenance{HarnessID: "openclaw", HarnessVersion: "x", HarnessCommit: "y", BuilderName: "b", BuilderVersion: "1"}},
	}
	for name, opts := range variants {
		p := buildVector(t, "full", opts)
		rb, err := p.Rebuild(selfTrusted(t, p))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rb.ReportHash == rb0.ReportHash {
			t.Errorf("%s: report hash unchanged", name)
		}
		if !bytes.Equal(rb.Prompt, rb0.Prompt) {
			t.Errorf("%s: prompt changed", name)
		}
	}
}

func TestModifiedTemplateRefused(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "full", BuildOptions{})
	trusted := selfTrusted(t, p)
	p.Harness.Templates["identity.txt"] = append(bytes.Clone(p.Harness.Templates["identity.txt"]), '!')
	_, err := p.Rebuild(trusted)
	te, ok := errors.AsType[*openclawsig.TemplateError](err)
	if !errors.Is(err, openclawsig.ErrTemplateModified) || !ok || te.Name != "identity.txt" {
		t.Fatalf("got %v, want modified identity.txt", err)
	}
	// Through the wire format too.
	_, q := reparse(t, p)
	if _, err := q.Rebuild(trusted); !errors.Is(err, openclawsig.ErrTemplateModified) {
		t.Fatalf("parsed: got %v", err)
	}
	if _, _, err := SealPack(q, mustKey(t).Public()); !errors.Is(err, openclawsig.ErrTemplateModified) {
		t.Fatalf("SealPack: got %v", err)
	}
}

func TestUntrustedTemplateRefused(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "full", BuildOptions{})
	trusted := selfTrusted(t, p)
	trusted["safety.txt"] = "sha256:" + strings.Repeat("ab", 32)
	_, err := p.Rebuild(trusted)
	te, ok := errors.AsType[*openclawsig.TemplateError](err)
	if !errors.Is(err, openclawsig.ErrTemplateUntrusted) || !ok || te.Name != "safety.txt" {
		t.Fatalf("got %v, want untrusted safety.txt", err)
	}
	if _, err := p.Rebuild(nil); !errors.Is(err, openclawsig.ErrTemplateUntrusted) {
		t.Fatalf("nil trusted list: got %v", err)
	}
	// A re-signed modified template is consistent but untrusted.
	text := []byte("You are somebody else.")
	sum := sha256.Sum256(text)
	p.Harness.Templates["identity.txt"] = text
	p.Harness.Sigs["identity.txt"] = []byte(fmt.Sprintf(`{"file":"llm/prompts/identity.txt","hash":"sha256:%x","algorithm":"sha256","contentLength":%d}`, sum, len(text)))
	_, err = p.Rebuild(selfTrusted(t, buildVector(t, "full", BuildOptions{})))
	te, ok = errors.AsType[*openclawsig.TemplateError](err)
	if !errors.Is(err, openclawsig.ErrTemplateUntrusted) || !ok || te.Name != "identity.txt" {
		t.Fatalf("re-signed: got %v", err)
	}
}

func TestUnknownRecipeRefused(t *testing.T) {
	p := synthPack()
	enc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, name string }{
		{`"id":"openclaw-sig"`, `"id":"openclaw-sih"`, "openclaw-sih"},
		{`"version":"1"}`, `"version":"2"}`, `"2"`},
	} {
		bad := bytes.Replace(enc, []byte(tc.from), []byte(tc.to), 1)
		if bytes.Equal(bad, enc) {
			t.Fatalf("replacement %s did not apply", tc.from)
		}
		_, err := Parse(bad)
		if !errors.Is(err, ErrUnknownRecipe) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: got %v", tc.to, err)
		}
	}
	q := synthPack()
	q.Recipe.Version = "2"
	if _, err := q.Rebuild(nil); !errors.Is(err, ErrUnknownRecipe) {
		t.Errorf("Rebuild: got %v", err)
	}
	if _, err := q.Encode(); !errors.Is(err, ErrUnknownRecipe) {
		t.Errorf("Encode: got %v", err)
	}
	if _, err := Build([]byte(`{}`), ".", "openclaw-next", BuildOptions{}); !errors.Is(err, ErrUnknownRecipe) || !strings.Contains(err.Error(), "openclaw-next") {
		t.Errorf("Build: got %v", err)
	}
	// Only the exact pairs are known: no case folding, no version range.
	for _, r := range []RecipeRef{{"openclaw-sig", "1"}, {"openclaw-release", "1"}} {
		if err := knownRecipe(r); err != nil {
			t.Errorf("%v: %v", r, err)
		}
	}
	for _, r := range []RecipeRef{{"openclaw-sig", "2"}, {"openclaw-release", "2"}, {"OpenClaw-sig", "1"}, {"openclaw-sig", "1.0"}, {"", ""}} {
		if err := knownRecipe(r); !errors.Is(err, ErrUnknownRecipe) {
			t.Errorf("%v: got %v", r, err)
		}
	}
}

func TestUnknownPackVersionRefused(t *testing.T) {
	enc, err := synthPack().Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"clawea.dev/promptpack/v2/pack", "clawea.dev/promptpack/v1", "Clawea.dev/promptpack/v1/pack"} {
		bad := bytes.Replace(enc, []byte(packVersion), []byte(v), 1)
		if _, err := Parse(bad); !errors.Is(err, ErrUnknownVersion) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s: got %v", v, err)
		}
	}
	noVersion := bytes.Replace(enc, []byte(`"pack_version"`), []byte(`"pack_versio"`), 1)
	if _, err := Parse(noVersion); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("missing version: got %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	enc, err := synthPack().Encode()
	if err != nil {
		t.Fatal(err)
	}
	s := string(enc)
	cases := []struct {
		name string
		doc  string
		want error
	}{
		{"unknown top field", strings.Replace(s, `"params_json"`, `"extra":1,"params_json"`, 1), errUnknownField},
		{"unknown nested field", strings.Replace(s, `"builder_name"`, `"builder_nam":"x","builder_name"`, 1), errUnknownField},
		{"case variant", strings.Replace(s, `"prompt_mode"`, `"Prompt_mode"`, 1), errUnknownField},
		{"missing field", strings.Replace(s, `"prompt_mode":"full",`, ``, 1), errMissingField},
		{"wrong type", strings.Replace(s, `"prompt_mode":"full"`, `"prompt_mode":1`, 1), errWrongType},
		{"null", strings.Replace(s, `"prompt_mode":"full"`, `"prompt_mode":null`, 1), errWrongType},
		{"empty ident", strings.Replace(s, `"harness_id":"openclaw"`, `"harness_id":""`, 1), errMissingField},
		{"schema not object", strings.Replace(s, `"tool_schemas":{"read":{`, `"tool_schemas":{"read":[{`, 1) + "]", ErrMalformed},
		{"bad raw hash", strings.Replace(s, `"raw_content_hash_b64u":"`, `"raw_content_hash_b64u":"=`, 1), errWrongType},
		{"not canonical: space", strings.Replace(s, `{"pack_version":`, `{"pack_version": `, 1), errNotCanonical},
		{"not canonical: order", reorder(s), errNotCanonical},
		{"not canonical: escape", strings.Replace(s, `"text":"hi`, `"text":"\u0068i`, 1), errNotCanonical},
		{"duplicate", strings.Replace(s, `"prompt_mode":"full"`, `"prompt_mode":"full","prompt_mode":"full"`, 1), ErrMalformed},
		{"trailing", s + " x", ErrMalformed},
		{"array", "[" + s + "]", ErrMalformed},
		{"too large", s[:len(s)-1] + `,"z":"` + strings.Repeat("a", maxPackSize) + `"}`, ErrTooLarge},
		{"empty", "", ErrMalformed},
	}
	for _, tc := range cases {
		if tc.doc == s {
			t.Fatalf("%s: mutation did not apply", tc.name)
		}
		p, err := Parse([]byte(tc.doc))
		if !errors.Is(err, tc.want) || p != nil {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

// reorder swaps two top-level members: same value, not canonical.
func reorder(s string) string {
	i := strings.Index(s, `,"params_json"`)
	j := strings.Index(s, `,"prompt_mode"`)
	return s[:i] + s[j:strings.Index(s, `,"provenance"`)] + s[i:j] + s[strings.Index(s, `,"provenance"`):]
}

func TestModeMismatchRefused(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "full", BuildOptions{})
	p.PromptMode = "minimal"
	if _, err := p.Rebuild(selfTrusted(t, p)); !errors.Is(err, ErrModeMismatch) {
		t.Fatalf("got %v", err)
	}
}

func TestReportSchemaRejectsBadReport(t *testing.T) {
	rep := &Report{ReportVersion: "1"}
	c, err := rep.canonical()
	if err != nil {
		t.Fatal(err)
	}
	err = validateReport(c)
	if _, ok := errors.AsType[*schemas.ValidationError](err); !errors.Is(err, ErrInvalidReport) || !ok {
		t.Fatalf("got %v", err)
	}
}

func TestPromptRootHash(t *testing.T) {
	// Order-independent input, UTF-16 order, as the schema defines it.
	a := []pohEntry{{EntryID: "b", ContentHashB64u: "hash-b-00"}, {EntryID: "a", ContentHashB64u: "hash-a-00"}}
	b := []pohEntry{a[1], a[0]}
	ha, err := promptRootHash(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := promptRootHash(b)
	want := b64u.SHA256([]byte(`{"prompt_pack_version":"1","entries":[{"entry_id":"a","content_hash_b64u":"hash-a-00"},{"entry_id":"b","content_hash_b64u":"hash-b-00"}]}`))
	if ha != want || hb != want {
		t.Fatalf("root %s / %s, want %s", ha, hb, want)
	}
	// U+FF41 sorts after an astral character in UTF-16 order (not in UTF-8).
	c := []pohEntry{{EntryID: "\uff41", ContentHashB64u: "x0000000"}, {EntryID: "\U0001F600", ContentHashB64u: "y0000000"}}
	hc, _ := promptRootHash(c)
	wantC := b64u.SHA256([]byte(`{"prompt_pack_version":"1","entries":[{"entry_id":"` + "\U0001F600" + `","content_hash_b64u":"y0000000"},{"entry_id":"` + "\uff41" + `","content_hash_b64u":"x0000000"}]}`))
	if hc != wantC {
		t.Fatal("entries not sorted in UTF-16 order")
	}
}

func TestParseTrusted(t *testing.T) {
	good := `{"a.txt":"sha256:` + strings.Repeat("0f", 32) + `"}`
	if m, err := ParseTrusted([]byte(good)); err != nil || len(m) != 1 {
		t.Fatalf("good: %v", err)
	}
	for _, bad := range []string{`[]`, `{"a.txt":"sha256:` + strings.Repeat("0F", 32) + `"}`, `{"a":1}`, `{"a":"x","a":"x"}`} {
		if _, err := ParseTrusted([]byte(bad)); !errors.Is(err, errInvalidInput) {
			t.Errorf("%s: got %v", bad, err)
		}
	}
}

func TestCommitmentInputRefused(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "min", BuildOptions{})
	rb := selfRebuild(t, p)
	in := ReportCommitmentInput{ReportID: "r", RunID: "run", AgentDID: "not-a-did", IssuedAt: time.Unix(0, 0), Calls: []CallRef{{EventID: "e"}}}
	if _, _, err := rb.SystemPromptReportCommitment(in); !errors.Is(err, errInvalidInput) {
		t.Fatalf("bad did: got %v", err)
	}
	in.AgentDID = "did:key:z6Mk"
	in.Calls = nil
	if _, _, err := rb.SystemPromptReportCommitment(in); !errors.Is(err, errInvalidInput) {
		t.Fatalf("no calls: got %v", err)
	}
}

func TestNoSecretsInStrings(t *testing.T) {
	p := synthPack()
	for _, s := range []string{p.String(), fmt.Sprintf("%v %+v %#v %x %s", p, p, p, p, p)} {
		if strings.Contains(s, "hi there") || strings.Contains(s, "workspaceDir") {
			t.Fatalf("pack contents printed: %s", s)
		}
	}
}

// ---- seal / open ----

func mustKey(tb testing.TB) *envelope.PrivateKey {
	tb.Helper()
	k, err := envelope.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

var openOpts = OpenOptions{AllowUnlocked: true}

func TestSealOpen(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "full", BuildOptions{})
	trusted := selfTrusted(t, p)
	rb0, err := p.Rebuild(trusted)
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := mustKey(t), mustKey(t)
	enc, m, err := SealPack(p, k1.Public(), k2.Public())
	if err != nil {
		t.Fatal(err)
	}
	if m.ReportHash != rb0.ReportHash || m.PackID != rb0.PackID {
		t.Fatal("manifest context is not {pack id, report hash}")
	}
	for _, k := range []*envelope.PrivateKey{k1, k2} {
		o, err := OpenPack(enc, m, k, rb0.ReportHash, openOpts)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := p.Encode()
		if !bytes.Equal(o.Bytes(), want) {
			t.Fatal("opened bytes differ")
		}
		rb, err := o.Rebuild(trusted)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rb.Prompt, rb0.Prompt) || rb.ReportHash != rb0.ReportHash {
			t.Fatal("rebuild after open differs")
		}
		o.Destroy()
		o.Destroy()
		if o.Bytes() != nil || o.Pack() != nil {
			t.Fatal("Destroy left data")
		}
	}

	// Tampering with any byte is refused.
	for _, off := range []int{0, 30, len(enc) / 2, len(enc) - 1} {
		bad := bytes.Clone(enc)
		bad[off] ^= 1
		if _, err := OpenPack(bad, m, k1, rb0.ReportHash, openOpts); !errors.Is(err, envelope.ErrManifestMismatch) {
			t.Errorf("tamper at %d: got %v", off, err)
		}
	}
	// Wrong key.
	_, err = OpenPack(enc, m, mustKey(t), rb0.ReportHash, openOpts)
	if !errors.Is(err, envelope.ErrNoMatchingRecipient) || !isWrongKey(err) {
		t.Errorf("wrong key: got %v", err)
	}
	// Another expected report hash.
	other := rb0.ReportHash
	other[0] ^= 1
	if _, err := OpenPack(enc, m, k1, other, openOpts); !errors.Is(err, envelope.ErrContextMismatch) {
		t.Errorf("other report hash: got %v", err)
	}
	// Untrusted template at open: refused, and the opened pack destroyed.
	o, err := OpenPack(enc, m, k1, rb0.ReportHash, openOpts)
	if err != nil {
		t.Fatal(err)
	}
	bad := selfTrusted(t, p)
	bad["tooling.txt"] = "sha256:" + strings.Repeat("00", 32)
	if _, err := o.Rebuild(bad); !errors.Is(err, openclawsig.ErrTemplateUntrusted) {
		t.Errorf("untrusted at open: got %v", err)
	}
	if o.Bytes() != nil || o.Pack() != nil {
		t.Error("opened pack not destroyed after a failed rebuild")
	}
}

// TestOpenBindings seals bodies with a wrong pack id or report hash
// directly through the envelope, as a dishonest sealer could.
func TestOpenBindings(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "min", BuildOptions{})
	rb := selfRebuild(t, p)
	body, _ := p.Encode()
	k := mustKey(t)

	enc, m, err := envelope.Seal(body, envelope.Context{PackID: "pack:other", ReportHash: rb.ReportHash}, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPack(enc, m, k, rb.ReportHash, openOpts); !errors.Is(err, ErrPackIDMismatch) {
		t.Errorf("pack id: got %v", err)
	}

	var wrong [32]byte
	wrong[5] = 7
	enc, m, err = envelope.Seal(body, envelope.Context{PackID: rb.PackID, ReportHash: wrong}, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	o, err := OpenPack(enc, m, k, wrong, openOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Rebuild(selfTrusted(t, p)); !errors.Is(err, ErrReportMismatch) {
		t.Errorf("report: got %v", err)
	}
	if o.Bytes() != nil {
		t.Error("not destroyed after report mismatch")
	}

	// A body that is not a canonical pack.
	enc, m, err = envelope.Seal([]byte(`{"pack_version":"x"}`), envelope.Context{PackID: packID([]byte(`{"pack_version":"x"}`)), ReportHash: wrong}, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPack(enc, m, k, wrong, openOpts); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("bad body: got %v", err)
	}
}

func TestOpenLocked(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "min", BuildOptions{})
	k := mustKey(t)
	enc, m, err := SealPack(p, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	o, err := OpenPack(enc, m, k, m.ReportHash, OpenOptions{})
	if errors.Is(err, sealed.ErrLockFailed) || errors.Is(err, sealed.ErrNotSupported) {
		citest.SkipOrFail(t, "no lockable memory here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer o.Destroy()
	if _, err := o.Rebuild(selfTrusted(t, p)); err != nil {
		t.Fatal(err)
	}
}

// ---- synthetic packs (no third-party text) ----

func synthPack() *Pack {
	mc := int64(100)
	return &Pack{
		Recipe:     RecipeRef{ID: openclawsig.ID, Version: openclawsig.Version},
		Provenance: Provenance{HarnessID: "openclaw", HarnessVersion: "0.0.1", HarnessCommit: "abc", BuilderName: "b", BuilderVersion: "1"},
		PromptMode: "full",
		Params:     []byte(`{"workspaceDir": "/w", "toolSummaries": {"b": "x", "a": "y"}}`),
		Harness: openclawsig.HarnessFiles{
			Templates:         map[string][]byte{"a.txt": []byte("hi there\n\u2028<&>\"\\\x01")},
			Sigs:              map[string][]byte{"a.txt": []byte(`{"file":"a.txt"}`)},
			Literals:          []byte(`{"literals":[]}`),
			CoreToolSummaries: []byte(`{"z":"1","a":"2"}`),
		},
		ToolSchemas:        map[string][]byte{"read": []byte(`{"properties":{"p":{"minimum":0.5,"type":"number"}},"type":"object"}`)},
		SkillsEnvOverrides: map[string]string{"K": "v"},
		RawContextFiles:    map[string]rawContextFile{"AGENTS.md": {Truncated: true, MaxChars: &mc}},
	}
}

func TestSynthRoundTrip(t *testing.T) {
	p := synthPack()
	_, q := reparse(t, p)
	if string(q.Params) != string(p.Params) || string(q.Harness.CoreToolSummaries) != string(p.Harness.CoreToolSummaries) {
		t.Fatal("raw text not kept byte for byte")
	}
	// An empty skills env map is kept as present.
	q.SkillsEnvOverrides = map[string]string{}
	enc3, _ := q.Encode()
	r, err := Parse(enc3)
	if err != nil || r.SkillsEnvOverrides == nil {
		t.Fatalf("empty env map: %v", err)
	}
}

// FuzzParse: whatever Parse accepts re-encodes to the identical bytes, and
// nothing is returned with an error.
func FuzzParse(f *testing.F) {
	if enc, err := synthPack().Encode(); err == nil {
		f.Add(enc)
	}
	// A pack with report salts (report v2).
	v2 := synthPack()
	v2.ReportSalts = map[string][saltSize]byte{"bootstrap:A.md": {1}, "params:params.json": {2}}
	if enc, err := v2.Encode(); err == nil {
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzcheck.RoundTrip(t, data, Parse, (*Pack).Encode)
	})
}

// TestSigPackNeedsTemplates: Parse reads an empty templates object (an
// openclaw-release pack has one), so an openclaw-sig pack without templates
// must be refused by its own rule.
func TestSigPackNeedsTemplates(t *testing.T) {
	enc, err := synthPack().Encode()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(enc, &doc); err != nil {
		t.Fatal(err)
	}
	doc["sources"].(map[string]any)["templates"] = map[string]any{}
	canon, err := jcs.Canonicalize(testjson.Marshal(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Parse(canon); !errors.Is(err, errMissingField) || p != nil {
		t.Fatalf("an openclaw-sig pack without templates: got %v, want ErrMissingField", err)
	}
	p := synthPack()
	p.Harness.Templates, p.Harness.Sigs = map[string][]byte{}, nil
	if _, err := p.Encode(); !errors.Is(err, errMissingField) {
		t.Fatalf("Encode without templates: got %v", err)
	}
}
