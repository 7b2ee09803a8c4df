package promptpack

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/octest"
	"github.com/clawea/attester/promptpack/recipe/openclawrelease"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
)

// TestInstalledReleasePack builds an openclaw-release pack from a real
// capture of the OpenClaw install named by CLAWEA_OPENCLAW_DIR (as
// TestInstalledOpenClaw of openclawrelease; hack/e2e-openclaw/run.sh runs
// both) and checks what an opener checks: the trust entry, the pack's
// stated provenance and mode, the document, and seal/open.
func TestInstalledReleasePack(t *testing.T) {
	dir := octest.Install(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.CopyFS(ws, os.DirFS("recipe/openclawrelease/testdata/workspace")); err != nil {
		t.Fatal(err)
	}
	data := octest.Capture(t, dir, ws)
	c, err := openclawrelease.ParseCapture(data)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Wipe()
	rel, err := openclawrelease.Lookup(c.OpenClawVersion)
	if err != nil {
		t.Fatal(err)
	}
	p, err := BuildRelease(c, dir, t.Logf)
	if err != nil {
		t.Fatalf("BuildRelease: %v", err)
	}
	defer p.Wipe()
	enc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Parse(enc)
	if err != nil {
		t.Fatalf("Parse of an encoded release pack: %v", err)
	}
	trusted, err := p2.SigHashes()
	if err != nil || len(trusted) != 1 {
		t.Fatalf("SigHashes: %v %v", trusted, err)
	}
	rb, err := p2.Rebuild(trusted)
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if !bytes.Equal(rb.Prompt, c.SystemPrompt) || rb.Mode != releasePromptMode || rb.Report.Recipe.ID != openclawrelease.ID ||
		rb.Report.Harness.Version != c.OpenClawVersion || len(rb.Report.Inputs.Templates) != len(rel.Files) {
		t.Fatalf("rebuilt %v, report %+v", rb, rb.Report)
	}
	want := rb.ReportHash
	rb.Wipe()

	// The opener's trust: none, another name, another hash.
	for name, tr := range map[string]map[string]string{
		"nothing trusted":  nil,
		"other version":    {releaseTrustName("2026.9.5"): trusted[releaseTrustName(c.OpenClawVersion)]},
		"other table hash": {releaseTrustName(c.OpenClawVersion): "sha256:" + strings.Repeat("0", 64)},
	} {
		if _, err := p2.Rebuild(tr); !errors.Is(err, openclawsig.ErrTemplateUntrusted) {
			t.Errorf("%s: got %v, want ErrTemplateUntrusted", name, err)
		}
	}

	// The pack cannot state another provenance or mode than the recipe's.
	for name, mut := range map[string]func(q *Pack){
		"harness commit": func(q *Pack) { q.Provenance.HarnessCommit = "04c9b1debfed6c74f3f2bdc011b668597e525b48" },
		"builder name":   func(q *Pack) { q.Provenance.BuilderName = "buildAgentSystemPrompt" },
		"prompt mode":    func(q *Pack) { q.PromptMode = "full" },
	} {
		q, _ := Parse(enc)
		mut(q)
		if _, err := q.Rebuild(trusted); err == nil {
			t.Errorf("%s: a changed pack rebuilt", name)
		}
	}

	// A document whose fragment text or layout was changed is refused.
	for name, mut := range map[string]func(doc string) string{
		// In the fragments section, not in the captured prompt: the
		// fragment no longer has its hash.
		"fragment text": func(doc string) string {
			i := strings.Index(doc, `"fragments":`)
			return doc[:i] + strings.Replace(doc[i:], "Safety", "Safetx", 1)
		},
		"bootstrap file": func(doc string) string {
			return strings.Replace(doc, "Ask before changing", "Never ask before changing", 1)
		},
		"slot moved": func(doc string) string {
			return strings.Replace(doc, `["slot","time.zone"`, `["slot","time.date"`, 1)
		},
	} {
		q, _ := Parse(enc)
		changed := mut(string(q.Params))
		if changed == string(q.Params) {
			t.Fatalf("%s: the mutation changed nothing", name)
		}
		q.Params = []byte(changed)
		if _, err := q.Rebuild(trusted); err == nil {
			t.Errorf("%s: a changed document rebuilt", name)
		}
	}
	// Members of the openclaw-sig form are refused in a release pack.
	q, _ := Parse(enc)
	q.ToolSchemas = map[string][]byte{"exec": []byte(`{}`)}
	if _, err := q.Encode(); !errors.Is(err, ErrMalformed) {
		t.Errorf("tool_schemas in a release pack: %v", err)
	}

	// Seal to a key and open: the report hash is the rebuild's.
	key := mustKey(t)
	sealedPack, m, err := SealPack(p2, key.Public())
	if err != nil {
		t.Fatalf("SealPack: %v", err)
	}
	o, err := OpenPack(sealedPack, m, key, want, OpenOptions{AllowUnlocked: true})
	if err != nil {
		t.Fatalf("OpenPack: %v", err)
	}
	defer o.Destroy()
	rb2, err := o.Rebuild(trusted)
	if err != nil || rb2.ReportHash != want {
		t.Fatalf("Rebuild of the opened pack: %v", err)
	}
	rb2.Wipe()
}
