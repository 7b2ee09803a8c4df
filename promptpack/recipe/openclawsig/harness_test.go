package openclawsig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

func loadHarness(t *testing.T) *Harness {
	t.Helper()
	requireConformance(t)
	h, err := LoadHarnessDir(conformanceDir)
	if err != nil {
		t.Fatalf("LoadHarnessDir: %v", err)
	}
	return h
}

// minimalParamsJSON is the smallest params document Render accepts.
const minimalParamsJSON = `{"workspaceDir":"/w"}`

func wantTemplateErr(t *testing.T, err, sentinel error, name string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want %v", err, sentinel)
	}
	te, ok := errors.AsType[*TemplateError](err)
	if !ok {
		t.Fatalf("err %T is not *TemplateError", err)
	}
	if te.Name != name {
		t.Errorf("TemplateError.Name = %q, want %q", te.Name, name)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error %q does not name %q", err, name)
	}
}

func TestCheckTemplatesModified(t *testing.T) {
	h := loadHarness(t)
	trusted := trustedFromSigs(t, h)
	h.files.Templates["safety.txt"][10] ^= 0x01 // one bit of one byte, in memory
	err := h.checkTemplates(trusted)
	wantTemplateErr(t, err, ErrTemplateModified, "safety.txt")
	_, err = Render(h, trusted, []byte(minimalParamsJSON))
	wantTemplateErr(t, err, ErrTemplateModified, "safety.txt")
}

func TestCheckTemplatesLengthMismatch(t *testing.T) {
	h := loadHarness(t)
	f := h.Files()
	sig := string(f.Sigs["identity.txt"])
	n := len(f.Templates["identity.txt"])
	f.Sigs["identity.txt"] = []byte(strings.Replace(sig, fmt.Sprintf(`"contentLength": %d`, n), fmt.Sprintf(`"contentLength": %d`, n+1), 1))
	if bytes.Equal(f.Sigs["identity.txt"], []byte(sig)) {
		t.Fatal("sig not rewritten")
	}
	h2, err := NewHarness(f)
	if err != nil {
		t.Fatal(err)
	}
	wantTemplateErr(t, h2.checkTemplates(trustedFromSigs(t, h2)), ErrTemplateModified, "identity.txt")
}

func TestCheckTemplatesUntrusted(t *testing.T) {
	h := loadHarness(t)
	trusted := trustedFromSigs(t, h)
	trusted["runtime.txt"] = "sha256:" + strings.Repeat("00", 32)
	wantTemplateErr(t, h.checkTemplates(trusted), ErrTemplateUntrusted, "runtime.txt")

	trusted = trustedFromSigs(t, h)
	delete(trusted, "message-provenance.txt") // unused by Render, still checked
	wantTemplateErr(t, h.checkTemplates(trusted), ErrTemplateUntrusted, "message-provenance.txt")

	wantTemplateErr(t, h.checkTemplates(nil), ErrTemplateUntrusted, h.TemplateNames()[0])
}

// A template re-signed consistently (sig matches) but not in the trusted
// list is refused: the sig alone proves nothing.
func TestCheckTemplatesResignedNotTrusted(t *testing.T) {
	h := loadHarness(t)
	trusted := trustedFromSigs(t, h)
	h2 := reword(t, h, "identity.txt", "You are someone else.")
	wantTemplateErr(t, h2.checkTemplates(trusted), ErrTemplateUntrusted, "identity.txt")
}

// reword returns a harness like h whose template name is content, its sig
// re-signed consistently (hash and contentLength rewritten).
func reword(t *testing.T, h *Harness, name, content string) *Harness {
	t.Helper()
	f := h.Files()
	s, err := parseSig(f.Sigs[name])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	sig := strings.Replace(string(f.Sigs[name]), s.Hash, "sha256:"+hex.EncodeToString(sum[:]), 1)
	sig = strings.Replace(sig, fmt.Sprintf(`"contentLength": %d`, s.ContentLength), fmt.Sprintf(`"contentLength": %d`, len(content)), 1)
	f.Templates[name], f.Sigs[name] = []byte(content), []byte(sig)
	h2, err := NewHarness(f)
	if err != nil {
		t.Fatal(err)
	}
	return h2
}

// TestRewordNeedsNoCode: a harness release that only rewords a template
// renders with the new words once its hash is trusted.
func TestRewordNeedsNoCode(t *testing.T) {
	h2 := reword(t, loadHarness(t), "workspace.txt", "## Where you work\nDirectory: {{workspace_dir}}\n\nKeep it {{tidy}}.")
	res, err := Render(h2, trustedFromSigs(t, h2), []byte(minimalParamsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(res.Prompt, []byte("\n## Where you work\nDirectory: /w\nKeep it {{tidy}}.\n")) {
		t.Errorf("reworded template not rendered as data:\n%s", res.Prompt)
	}
}

func TestNewHarnessRefuses(t *testing.T) {
	h := loadHarness(t)
	t.Run("unsigned", func(t *testing.T) {
		f := h.Files()
		delete(f.Sigs, "voice.txt")
		h2, err := NewHarness(f)
		if err != nil {
			t.Fatal(err)
		}
		wantTemplateErr(t, h2.checkTemplates(trustedFromSigsLenient(h2)), ErrTemplateUnsigned, "voice.txt")
	})
	t.Run("missing required template", func(t *testing.T) {
		f := h.Files()
		delete(f.Templates, "heartbeats.txt")
		delete(f.Sigs, "heartbeats.txt")
		_, err := NewHarness(f)
		wantTemplateErr(t, err, ErrTemplateMissing, "heartbeats.txt")
	})
	mutate := map[string]func(f *HarnessFiles){
		"sig without template": func(f *HarnessFiles) { f.Sigs["extra.txt"] = f.Sigs["voice.txt"] },
		"bad template name":    func(f *HarnessFiles) { f.Templates["../x.txt"] = []byte("x") },
		"hidden template name": func(f *HarnessFiles) { f.Templates[".x.txt"] = []byte("x") },
		"non-txt template":     func(f *HarnessFiles) { f.Templates["x.md"] = []byte("x") },
		"invalid utf-8":        func(f *HarnessFiles) { f.Templates["voice.txt"] = []byte("\xff") },
		"oversized template":   func(f *HarnessFiles) { f.Templates["big.txt"] = make([]byte, maxTemplateSize+1) },
		"sig names other file": func(f *HarnessFiles) { f.Sigs["voice.txt"] = f.Sigs["time.txt"] },
		"sig bad algorithm": func(f *HarnessFiles) {
			f.Sigs["voice.txt"] = bytes.Replace(f.Sigs["voice.txt"], []byte(`"sha256",`), []byte(`"md5",`), 1)
		},
		"sig upper-case hash": func(f *HarnessFiles) {
			s, _ := parseSig(f.Sigs["voice.txt"])
			f.Sigs["voice.txt"] = bytes.Replace(f.Sigs["voice.txt"], []byte(s.Hash), []byte("sha256:"+strings.ToUpper(s.Hash[7:])), 1)
		},
		"sig short hash": func(f *HarnessFiles) {
			s, _ := parseSig(f.Sigs["voice.txt"])
			f.Sigs["voice.txt"] = bytes.Replace(f.Sigs["voice.txt"], []byte(s.Hash), []byte(s.Hash[:70]), 1)
		},
		"literals empty":        func(f *HarnessFiles) { f.Literals = nil },
		"core summaries array":  func(f *HarnessFiles) { f.CoreToolSummaries = []byte(`[]`) },
		"core summaries number": func(f *HarnessFiles) { f.CoreToolSummaries = []byte(`{"a":1}`) },
	}
	for name, m := range mutate {
		t.Run(name, func(t *testing.T) {
			f := h.Files()
			m(&f)
			_, err := NewHarness(f)
			if !errors.Is(err, ErrInvalidHarness) {
				t.Fatalf("err = %v, want ErrInvalidHarness", err)
			}
			if errors.Is(err, ErrInvalidParams) {
				t.Error("harness error matches ErrInvalidParams")
			}
		})
	}
	// Refusals whose reason is checked too.
	reasons := []struct {
		name string
		m    func(f *HarnessFiles)
		want error
	}{
		{"literals missing id", func(f *HarnessFiles) { f.Literals = removeLiteral(t, f.Literals, "output_joiner") }, jsonobj.ErrMissingField},
		{"literals missing runtime key", func(f *HarnessFiles) {
			f.Literals = setLiteral(t, f.Literals, "runtime_part_keys", "value", map[string]string{"host": "host="})
		}, jsonobj.ErrMissingField},
		{"literals unknown id", func(f *HarnessFiles) {
			f.Literals = setLiteral(t, f.Literals, "output_joiner", "id", "output_joiner_v2")
		}, jsonobj.ErrUnknownField},
		{"literals unknown entry key", func(f *HarnessFiles) { f.Literals = setLiteral(t, f.Literals, "output_joiner", "note", "x") }, jsonobj.ErrUnknownField},
		{"literals wrong type", func(f *HarnessFiles) { f.Literals = setLiteral(t, f.Literals, "tool_order", "value", "read") }, jsonobj.ErrWrongType},
		{"literals null value", func(f *HarnessFiles) { f.Literals = setLiteral(t, f.Literals, "output_joiner", "value", nil) }, jsonobj.ErrWrongType},
		{"literals duplicate id", func(f *HarnessFiles) {
			f.Literals = setLiteral(t, f.Literals, "owner_line_prefix", "id", "output_joiner")
		}, pohjson.ErrDuplicateKey},
		{"core summaries dup", func(f *HarnessFiles) { f.CoreToolSummaries = []byte(`{"a":"1","a":"2"}`) }, pohjson.ErrDuplicateKey},
		{"sig unknown field", func(f *HarnessFiles) { f.Sigs["voice.txt"] = addField(f.Sigs["voice.txt"], `"extra": 1`) }, jsonobj.ErrUnknownField},
		{"sig not json", func(f *HarnessFiles) { f.Sigs["voice.txt"] = []byte("{") }, jsonobj.ErrSyntax},
		{"sig negative length", func(f *HarnessFiles) {
			f.Sigs["voice.txt"] = regexp.MustCompile(`"contentLength": \d+`).ReplaceAll(f.Sigs["voice.txt"], []byte(`"contentLength": -1`))
		}, jsonobj.ErrWrongType},
	}
	for _, tc := range reasons {
		t.Run(tc.name, func(t *testing.T) {
			f := h.Files()
			tc.m(&f)
			_, err := NewHarness(f)
			if !errors.Is(err, ErrInvalidHarness) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want ErrInvalidHarness and %v", err, tc.want)
			}
		})
	}
}

func trustedFromSigsLenient(h *Harness) map[string]string {
	trusted := map[string]string{}
	for _, name := range h.TemplateNames() {
		if s, ok := h.Sig(name); ok {
			trusted[name] = s.Hash
		}
	}
	return trusted
}

func addField(obj []byte, field string) []byte {
	i := bytes.LastIndexByte(obj, '}')
	return append(append(bytes.Clone(obj[:i]), []byte(", "+field)...), obj[i:]...)
}

// editLiterals decodes hardcoded-literals.json, lets fn edit the entries
// and re-encodes it.
func editLiterals(t *testing.T, b []byte, fn func(entries []map[string]any) []map[string]any) []byte {
	t.Helper()
	var doc struct {
		About    string           `json:"about"`
		Literals []map[string]any `json:"literals"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := len(doc.Literals)
	doc.Literals = fn(doc.Literals)
	out := testjson.Marshal(t, doc)
	if bytes.Equal(out, b) || n == 0 {
		t.Fatal("literal edit had no effect")
	}
	return out
}

func removeLiteral(t *testing.T, b []byte, id string) []byte {
	return editLiterals(t, b, func(e []map[string]any) []map[string]any {
		return slices.DeleteFunc(e, func(m map[string]any) bool { return m["id"] == id })
	})
}

func setLiteral(t *testing.T, b []byte, id, key string, v any) []byte {
	return editLiterals(t, b, func(e []map[string]any) []map[string]any {
		for _, m := range e {
			if m["id"] == id {
				m[key] = v
			}
		}
		return e
	})
}

// TestRenderRequiresCheck: Render checks the templates against the trusted
// hashes before it reads the params, and renders nothing otherwise.
func TestRenderRequiresCheck(t *testing.T) {
	h := loadHarness(t)
	params := []byte(minimalParamsJSON)
	_, err := Render(h, nil, params)
	wantTemplateErr(t, err, ErrTemplateUntrusted, h.TemplateNames()[0])
	// The templates are checked first: untrusted and unreadable params
	// give the template refusal.
	_, err = Render(h, nil, []byte(`{`))
	wantTemplateErr(t, err, ErrTemplateUntrusted, h.TemplateNames()[0])
	if _, err := Render(nil, trustedFromSigs(t, h), params); !errors.Is(err, ErrInvalidHarness) {
		t.Errorf("nil harness: %v", err)
	}
	if _, err := Render(&Harness{}, trustedFromSigs(t, h), params); !errors.Is(err, ErrTemplateMissing) {
		t.Errorf("zero harness: %v", err)
	}
	if _, err := Render(h, trustedFromSigs(t, h), nil); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("nil params: %v", err)
	}
	if _, err := renderChecked(h, nil); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("nil parsed params: %v", err)
	}
	res, err := Render(h, trustedFromSigs(t, h), params)
	if err != nil || res.Params == nil || res.Params.WorkspaceDir != "/w" {
		t.Fatalf("Render: %v", err)
	}
}

func TestLoadHarnessDirRefuses(t *testing.T) {
	requireConformance(t)
	if _, err := LoadHarnessDir(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, ErrInvalidHarness) {
		t.Errorf("absent dir: %v", err)
	}
	copyDir := func(t *testing.T) string {
		dst := t.TempDir()
		if err := os.CopyFS(dst, os.DirFS(conformanceDir)); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	t.Run("extra file in templates", func(t *testing.T) {
		d := copyDir(t)
		if err := os.WriteFile(filepath.Join(d, "templates", "NOTES.md"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadHarnessDir(d); !errors.Is(err, ErrInvalidHarness) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("symlinked template", func(t *testing.T) {
		d := copyDir(t)
		p := filepath.Join(d, "templates", "voice.txt")
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(d, "README.md"), p); err != nil {
			t.Skip(err)
		}
		if _, err := LoadHarnessDir(d); !errors.Is(err, ErrInvalidHarness) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("oversized template", func(t *testing.T) {
		d := copyDir(t)
		if err := os.WriteFile(filepath.Join(d, "templates", "voice.txt"), make([]byte, maxTemplateSize+1), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadHarnessDir(d); !errors.Is(err, ErrInvalidHarness) || !errors.Is(err, jsonobj.ErrTooLarge) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("missing literals", func(t *testing.T) {
		d := copyDir(t)
		if err := os.Remove(filepath.Join(d, "hardcoded-literals.json")); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadHarnessDir(d); !errors.Is(err, ErrInvalidHarness) {
			t.Errorf("err = %v", err)
		}
	})
}

// TestHarnessImmutable: accessors hand out copies.
func TestHarnessImmutable(t *testing.T) {
	h := loadHarness(t)
	trusted := trustedFromSigs(t, h)
	f := h.Files()
	f.Templates["identity.txt"][0] ^= 0xff
	s, _ := h.Sig("identity.txt")
	s.Raw[0] ^= 0xff
	h.coreToolSummaries()[0].Summary = "changed"
	if err := h.checkTemplates(trusted); err != nil {
		t.Fatalf("harness changed through a copy: %v", err)
	}
	if got := h.coreToolSummaries()[0]; got.Summary == "changed" {
		t.Error("core summaries changed through a copy")
	}
}

// FuzzHarnessJSON: the sig, literals and core-summary parsers never panic.
func FuzzHarnessJSON(f *testing.F) {
	f.Add(uint8(0), []byte(`{"file":"a/b.txt","hash":"sha256:00","algorithm":"sha256","contentLength":1}`))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		switch kind % 3 {
		case 0:
			if s, err := parseSig(data); err == nil && (!validHash(s.Hash) || s.ContentLength < 0) {
				t.Fatalf("accepted bad sig %+v", s)
			}
		case 1:
			if l, err := parseLiterals(data); err == nil && len(l.toolOrder) == 0 {
				t.Fatal("accepted literals without tool_order")
			}
		case 2:
			_, _ = parseCoreSummaries(data)
		}
	})
}
