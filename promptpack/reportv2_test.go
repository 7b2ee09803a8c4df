package promptpack

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/schemas"
)

// testSalts returns deterministic salts for the worked examples:
// salt(sel) = SHA-256("test salt " || sel). Real packs draw them from
// crypto/rand (Build).
func testSalts(sels []string) map[string][saltSize]byte {
	out := map[string][saltSize]byte{}
	for _, s := range sels {
		out[s] = sha256.Sum256([]byte("test salt " + s))
	}
	return out
}

func examplePack(tb testing.TB, version int) *Pack {
	tb.Helper()
	requireConformance(tb)
	params := testfile.Read(tb, filepath.Join("testdata", "reportv2", "params.json"))
	p, err := Build(params, conformanceDir, openclawsig.ID, BuildOptions{ReportVersion: version})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// exampleV2 is the worked example of docs/spec/report-v2.md: the example
// params with the deterministic test salts.
func exampleV2(tb testing.TB) *Pack {
	tb.Helper()
	p := examplePack(tb, 2)
	sels := make([]string, 0, len(p.ReportSalts))
	for s := range p.ReportSalts {
		sels = append(sels, s)
	}
	p.ReportSalts = testSalts(sels)
	return p
}

func TestBuildV2(t *testing.T) {
	p := examplePack(t, 2)
	if len(p.ReportSalts) == 0 {
		t.Fatal("no salts")
	}
	seen := map[[saltSize]byte]bool{}
	for sel, s := range p.ReportSalts {
		if seen[s] || s == ([saltSize]byte{}) {
			t.Fatalf("salt of %s repeated or zero", sel)
		}
		seen[s] = true
	}
	enc, q := reparse(t, p)
	if !bytes.HasPrefix(enc, []byte(`{"pack_version":"`+packVersion+`"`)) {
		t.Fatal("pack does not start with its version")
	}
	rb := selfRebuild(t, q)
	defer rb.Wipe()
	if err := schemas.Validate(schemas.SystemPromptReportV2, rb.ReportJCS); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(rb.ReportJCS, []byte(`{"builder":`)) || !bytes.Contains(rb.ReportJCS, []byte(`"report_version":"2"`)) {
		t.Fatalf("report: %.80s", rb.ReportJCS)
	}
	// The salts never appear in the report.
	for _, s := range q.ReportSalts {
		if bytes.Contains(rb.ReportJCS, []byte(b64u.Encode(s[:]))) {
			t.Fatal("a salt is in the report")
		}
	}
	// Nor do they in the PoH commitment.
	_, pp, err := rb.promptPack()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(pp, []byte(b64u.SHA256(q.Params))) {
		t.Fatal("the PoH prompt pack carries the unsalted params hash")
	}
	// parseReportV2 reads what Rebuild writes.
	pr, err := parseReportV2(rb.ReportJCS)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Hash != rb.ReportHash || len(pr.Commitments) != len(q.ReportSalts) {
		t.Fatalf("parsed report: %d commitments", len(pr.Commitments))
	}
	// Two builds of the same inputs give different reports (fresh salts).
	p2 := examplePack(t, 2)
	rb2 := selfRebuild(t, p2)
	if rb2.ReportHash == rb.ReportHash || rb2.PromptHashB64u() != rb.PromptHashB64u() {
		t.Fatal("fresh salts should change the report, not the prompt")
	}
}

// TestV2CommitsToV1Bytes checks that each v2 input covers exactly the bytes
// the v1 hash of the same input covers.
func TestV2CommitsToV1Bytes(t *testing.T) {
	for _, name := range []string{"full", "context-crlf-emoji", "none-with-everything"} {
		p := buildVector(t, name, BuildOptions{})
		rb, err := p.rebuild(selfTrusted(t, p), true, true)
		if err != nil {
			t.Fatal(err)
		}
		in := rb.Report.Inputs
		want := map[string]string{
			"params:params.json":         in.ParamsHashB64u,
			"tools:resolved_names":       in.ResolvedToolNamesHashB64u,
			"tools:schemas":              in.ToolSchemasHashB64u,
			"tools:summaries":            in.ToolSummariesHashB64u,
			"skills:prompt":              in.SkillsPromptHashB64u,
			"skills:env_overrides":       in.SkillsEnvOverridesHashB64u,
			"prompt:extra_system_prompt": in.ExtraSystemPromptHashB64u,
			"prompt:runtime_line":        in.RuntimeLineHashB64u,
			"params:sandboxInfo":         in.SandboxContextHashB64u,
			"params:ownerNumbers":        in.OwnerNumbersHashB64u,
			"params:messageToolHints":    in.MessagingHintsHashB64u,
			"params:ttsHint":             in.TTSHintsHashB64u,
			"params:modelAliasLines":     in.ModelAliasesHashB64u,
		}
		for _, b := range in.Bootstrap {
			if b.PathHint != "" {
				want["bootstrap:"+b.PathHint] = b.ContentHashB64u
			}
		}
		got := map[string]bool{}
		for _, x := range rb.inputs {
			sel := x.selector()
			got[sel] = true
			if sel == "params:userTimezone" {
				continue // v1 hashes {"userTimezone": value}
			}
			if w := want[sel]; w != b64u.SHA256(x.content) {
				t.Errorf("%s: %s: v2 content hash %s, v1 %q", name, sel, b64u.SHA256(x.content), w)
			}
		}
		for sel, h := range want {
			if h != "" && !got[sel] {
				t.Errorf("%s: v1 hashes %s, v2 has no input", name, sel)
			}
		}
		rb.Wipe()
	}
}

// TestV2RefusesUnnamedContextFile: a v2 input needs an id, so a context
// file with an empty path cannot be reported in v2.
func TestV2RefusesUnnamedContextFile(t *testing.T) {
	requireConformance(t)
	if _, err := Build(readParams(t, "context-edge-paths"), conformanceDir, openclawsig.ID, BuildOptions{ReportVersion: 2}); !errors.Is(err, ErrInvalidReport) {
		t.Fatalf("err %v, want ErrInvalidReport", err)
	}
}

func TestV2SaltsMustMatchInputs(t *testing.T) {
	p := exampleV2(t)
	trusted := selfTrusted(t, p)
	var one string
	for s := range p.ReportSalts {
		one = s
		break
	}
	missing := exampleV2(t)
	delete(missing.ReportSalts, one)
	if _, err := missing.Rebuild(trusted); !errors.Is(err, errSalts) {
		t.Fatalf("missing salt: %v", err)
	}
	extra := exampleV2(t)
	extra.ReportSalts["bootstrap:NOT-RENDERED.md"] = [saltSize]byte{1}
	if _, err := extra.Rebuild(trusted); !errors.Is(err, errSalts) {
		t.Fatalf("extra salt: %v", err)
	}
	renamed := exampleV2(t)
	renamed.ReportSalts["bootstrap:OTHER.md"] = renamed.ReportSalts[one]
	delete(renamed.ReportSalts, one)
	if _, err := renamed.Rebuild(trusted); !errors.Is(err, errSalts) {
		t.Fatalf("renamed salt: %v", err)
	}
	// One changed salt changes the report hash, so an attester holding the
	// committed hash refuses the pack (Opened.Rebuild compares it).
	base, err := p.Rebuild(trusted)
	if err != nil {
		t.Fatal(err)
	}
	changed := exampleV2(t)
	s := changed.ReportSalts[one]
	s[0] ^= 1
	changed.ReportSalts[one] = s
	rb, err := changed.Rebuild(trusted)
	if err != nil {
		t.Fatal(err)
	}
	if rb.ReportHash == base.ReportHash {
		t.Fatal("a changed salt did not change the report hash")
	}
}

// TestV2SealOpen is the attester's path: seal a v2 pack, open it with the
// committed report hash and rebuild; the rebuilt v2 report must match.
func TestV2SealOpen(t *testing.T) {
	p := exampleV2(t)
	k := mustKey(t)
	enc, m, err := SealPack(p, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	o, err := OpenPack(enc, m, k, m.ReportHash, OpenOptions{AllowUnlocked: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Destroy()
	if len(o.Pack().ReportSalts) != len(p.ReportSalts) {
		t.Fatal("salts lost in the envelope")
	}
	rb, err := o.Rebuild(selfTrusted(t, p))
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Wipe()
	if rb.Report.ReportVersion != ReportVersion2 {
		t.Fatal("not v2")
	}
	// A v1 report hash of the same pack is refused.
	v1 := exampleV2(t)
	v1.ReportSalts = nil
	rb1 := selfRebuild(t, v1)
	o2, err := OpenPack(enc, m, k, rb1.ReportHash, OpenOptions{AllowUnlocked: true})
	if err == nil {
		_, err = o2.Rebuild(selfTrusted(t, p))
	}
	if err == nil {
		t.Fatal("opened a v2 pack against its v1 report hash")
	}
}

func TestRevealV2(t *testing.T) {
	p := exampleV2(t)
	rb := selfRebuild(t, p)
	defer rb.Wipe()
	r, err := rb.reveal("bootstrap:AGENTS.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Content) != "# Agents\n\nAnswer in English.\n" || r.Salt != p.ReportSalts["bootstrap:AGENTS.md"] {
		t.Fatalf("reveal: %q", r.Content)
	}
	pr, err := parseReportV2(rb.ReportJCS)
	if err != nil {
		t.Fatal(err)
	}
	if inputCommitment(r.Salt, r.Kind, r.ID, r.Content) != pr.Commitments["bootstrap:AGENTS.md"] {
		t.Fatal("revealed input does not match its commitment")
	}
	for _, bad := range []string{"bootstrap:MISSING.md", "nokind:x", "bootstrap:", "AGENTS.md"} {
		if _, err := rb.reveal(bad); !errors.Is(err, errUnknownInput) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	v1 := examplePack(t, 1)
	rb1 := selfRebuild(t, v1)
	if _, err := rb1.reveal("bootstrap:AGENTS.md"); !errors.Is(err, errNotSalted) {
		t.Fatalf("v1 reveal: %v", err)
	}
	if _, err := parseReportV2(rb1.ReportJCS); !errors.Is(err, errNotSalted) {
		t.Fatalf("v1 report: %v", err)
	}
}

// TestOwnerNumberGuess is why v2 exists: an owner number has a small
// search space. Against a v1 report the owner_numbers hash confirms the
// right guess among all 10^4 candidates; against a v2 report no candidate
// matches without the salt, and with the salt exactly the right one does.
func TestOwnerNumberGuess(t *testing.T) {
	candidate := func(i int) []byte { return fmt.Appendf(nil, `["+1555000%04d"]`, i) }
	const secret = 4271 // the example params' owner number

	v1 := examplePack(t, 1)
	rb1 := selfRebuild(t, v1)
	var found []int
	for i := range 10000 {
		if b64u.SHA256(candidate(i)) == rb1.Report.Inputs.OwnerNumbersHashB64u {
			found = append(found, i)
		}
	}
	if len(found) != 1 || found[0] != secret {
		t.Fatalf("v1: guessing found %v, want [%d]", found, secret)
	}

	p := examplePack(t, 2) // fresh random salts
	rb := selfRebuild(t, p)
	defer rb.Wipe()
	pr, err := parseReportV2(rb.ReportJCS)
	if err != nil {
		t.Fatal(err)
	}
	// Without the salt: try every candidate against every commitment of
	// the report, as plain hashes and as commitments under a guessed
	// (zero) salt. Nothing may match.
	for i := range 10000 {
		c := candidate(i)
		plain := sha256.Sum256(c)
		guess := inputCommitment([saltSize]byte{}, kindParams, "ownerNumbers", c)
		for sel, com := range pr.Commitments {
			if com == plain || com == guess {
				t.Fatalf("v2: candidate %d matches %s without the salt", i, sel)
			}
		}
		if strings.Contains(string(rb.ReportJCS), b64u.Encode(plain[:])) {
			t.Fatalf("v2: candidate %d's plain hash is in the report", i)
		}
	}
	// With the salt (a disclosure of this input) the search succeeds.
	salt := p.ReportSalts["params:ownerNumbers"]
	found = nil
	for i := range 10000 {
		if inputCommitment(salt, kindParams, "ownerNumbers", candidate(i)) == pr.Commitments["params:ownerNumbers"] {
			found = append(found, i)
		}
	}
	if len(found) != 1 || found[0] != secret {
		t.Fatalf("v2 with salt: found %v, want [%d]", found, secret)
	}
}

func TestParseRejectsBadSalts(t *testing.T) {
	p := exampleV2(t)
	enc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	s := string(enc)
	salt := p.ReportSalts["bootstrap:AGENTS.md"]
	sb := b64u.Encode(salt[:])
	for _, tc := range []struct{ name, doc string }{
		{"short salt", strings.Replace(s, sb, sb[:40], 1)},
		{"not b64u", strings.Replace(s, sb, "="+sb[1:], 1)},
		{"unknown kind", strings.Replace(s, `"bootstrap:AGENTS.md":`, `"file:AGENTS.md":`, 1)},
		{"no colon", strings.Replace(s, `"bootstrap:AGENTS.md":`, `"bootstrapAGENTS.md":`, 1)},
		{"empty id", strings.Replace(s, `"bootstrap:AGENTS.md":`, `"bootstrap:":`, 1)},
		{"not a string", strings.Replace(s, `"`+sb+`"`, `1`, 1)},
		{"empty", s[:strings.Index(s, `"report_salts":{`)] + `"report_salts":{}` + s[strings.Index(s, `},"sources"`)+1:]},
	} {
		if tc.doc == s {
			t.Fatalf("%s: mutation did not apply", tc.name)
		}
		q, err := Parse([]byte(tc.doc))
		fe, ok := errors.AsType[*fieldError](err)
		if !errors.Is(err, ErrMalformed) || q != nil || !ok || !strings.HasPrefix(fe.Field, "$.report_salts") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
