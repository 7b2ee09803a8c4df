package openclawrelease

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/clawea/attester/promptpack/recipe"
)

// toyRelease is a Release with trivial rules, to test Build's checks: the
// prompt is the fixed text "head", then each bootstrap file as
// "## NAME\n" + content, then the tool names joined by ",". It is not an
// OpenClaw release.
type toyRelease struct{ version string }

var toyFixed = FixedText{"head": []byte("You are a test agent.\n")}

func (r toyRelease) OpenClawVersion() string { return r.version }

func (toyRelease) Pinned() map[string]string {
	return map[string]string{"head": taggedSHA256(toyFixed["head"])}
}

func (toyRelease) Render(fixed FixedText, c *Capture) ([]byte, error) {
	var b bytes.Buffer
	b.Write(fixed["head"])
	for _, f := range c.BootstrapFiles {
		fmt.Fprintf(&b, "## %s\n", f.Name)
		b.Write(f.Content)
	}
	names := make([]string, 0, len(c.Tools))
	for _, t := range c.Tools {
		names = append(names, t.Name)
	}
	b.WriteString(strings.Join(names, ","))
	return b.Bytes(), nil
}

type wire = map[string]any

// toyCapture is a capture the toy release reproduces.
func toyCapture() wire {
	return wire{
		"capture_version":     "1",
		"openclaw_version":    "2026.9.6",
		"request_sha256_b64u": "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU",
		"system_prompt":       "You are a test agent.\n## AGENTS.md\nBe careful.\n## SOUL.md\nPlain.\nread,exec",
		"tools": []any{
			wire{"name": "read", "description": "Read a file.", "parameters": wire{"type": "object", "properties": wire{"path": wire{"type": "string"}}}},
			wire{"name": "exec", "description": "Run a command.", "parameters": wire{"type": "object", "properties": wire{"command": wire{"type": "string"}}, "required": []any{"command"}}},
		},
		"bootstrap_files": []any{
			wire{"name": "AGENTS.md", "content": "Be careful.\n"},
			wire{"name": "SOUL.md", "content": "Plain.\n"},
		},
	}
}

func encode(t *testing.T, w wire) []byte {
	t.Helper()
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parse(t *testing.T, w wire) *Capture {
	t.Helper()
	c, err := ParseCapture(encode(t, w))
	if err != nil {
		t.Fatalf("ParseCapture: %v", err)
	}
	return c
}

func toyReleases() map[string]Release { return map[string]Release{"2026.9.6": toyRelease{"2026.9.6"}} }

func TestRecipeID(t *testing.T) {
	if _, err := recipe.Match(Recipe{}, "openclaw-release", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := recipe.Match(Recipe{}, "openclaw-release", "2"); !errors.Is(err, recipe.ErrUnknownRecipe) {
		t.Fatalf("version 2: %v", err)
	}
}

func TestParseCapture(t *testing.T) {
	c := parse(t, toyCapture())
	if c.OpenClawVersion != "2026.9.6" || len(c.Tools) != 2 || len(c.BootstrapFiles) != 2 {
		t.Fatalf("parsed %v", c)
	}
	if got := string(c.Tools[1].SchemaJCS); got != `{"properties":{"command":{"type":"string"}},"required":["command"],"type":"object"}` {
		t.Fatalf("schema JCS %s", got)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", c, c, c, c); strings.Contains(s, "careful") || strings.Contains(s, "test agent") {
		t.Fatalf("formatting leaks the capture: %s", s)
	}
}

func TestParseCaptureRefuses(t *testing.T) {
	mut := map[string]func(w wire){
		"unknown member":      func(w wire) { w["extra"] = 1 },
		"missing member":      func(w wire) { delete(w, "tools") },
		"capture version":     func(w wire) { w["capture_version"] = "2" },
		"version not release": func(w wire) { w["openclaw_version"] = "latest" },
		"version path":        func(w wire) { w["openclaw_version"] = "../2026" },
		"empty prompt":        func(w wire) { w["system_prompt"] = "" },
		"request hash":        func(w wire) { w["request_sha256_b64u"] = "AAAA" },
		"duplicate tool": func(w wire) {
			ts := w["tools"].([]any)
			w["tools"] = append(ts, ts[0])
		},
		"tool schema not object": func(w wire) { w["tools"].([]any)[0].(wire)["parameters"] = "x" },
		"tool unknown member":    func(w wire) { w["tools"].([]any)[0].(wire)["strict"] = true },
		"file with directory":    func(w wire) { w["bootstrap_files"].([]any)[0].(wire)["name"] = "../AGENTS.md" },
		"file dot-dot":           func(w wire) { w["bootstrap_files"].([]any)[0].(wire)["name"] = ".." },
		"duplicate file": func(w wire) {
			fs := w["bootstrap_files"].([]any)
			w["bootstrap_files"] = append(fs, fs[0])
		},
	}
	for name, m := range mut {
		t.Run(name, func(t *testing.T) {
			w := toyCapture()
			m(w)
			if _, err := ParseCapture(encode(t, w)); !errors.Is(err, ErrInvalidCapture) {
				t.Fatalf("got %v, want ErrInvalidCapture", err)
			}
		})
	}
	raw := map[string]string{
		"duplicate key": `{"capture_version":"1","capture_version":"1"}`,
		"invalid utf-8": "{\"capture_version\":\"\xff\"}",
		"not an object": `[]`,
		"trailing data": string(encode(t, toyCapture())) + "{}",
	}
	for name, s := range raw {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseCapture([]byte(s)); !errors.Is(err, ErrInvalidCapture) {
				t.Fatalf("got %v, want ErrInvalidCapture", err)
			}
		})
	}
}

func TestBuildReproduces(t *testing.T) {
	c := parse(t, toyCapture())
	res, err := Build(c, toyReleases(), toyFixed)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	r := res.Report
	if r.Harness.Version != "2026.9.6" || r.Recipe.ID != ID || len(r.FixedText) != 1 || r.Tools.Count != 2 || len(r.Bootstrap) != 2 {
		t.Fatalf("report %+v", r)
	}
	// The same capture builds the same report (no clock, no randomness).
	res2, err := Build(parse(t, toyCapture()), toyReleases(), toyFixed)
	if err != nil || res2.ReportHash != res.ReportHash || !bytes.Equal(res2.ReportJCS, res.ReportJCS) {
		t.Fatalf("rebuild differs: %v", err)
	}
}

func TestBuildRefusesUnknownVersion(t *testing.T) {
	for _, v := range []string{"2026.9.5", "2026.9.7", "2026.9.6-beta.1"} {
		w := toyCapture()
		w["openclaw_version"] = v
		if _, err := Build(parse(t, w), toyReleases(), toyFixed); !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("%s: got %v, want ErrUnsupportedVersion", v, err)
		}
	}
	// This recipe version re-renders no release yet: every capture is
	// refused, whatever its version.
	if len(Supported()) != 0 {
		t.Fatal("Supported lists a release: add its tests against a real install")
	}
	if _, err := Build(parse(t, toyCapture()), Supported(), toyFixed); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("got %v, want ErrUnsupportedVersion", err)
	}
	// A table entry whose release names another version is not used.
	bad := map[string]Release{"2026.9.6": toyRelease{"2026.9.5"}}
	if _, err := Build(parse(t, toyCapture()), bad, toyFixed); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("mismatched entry: got %v", err)
	}
}

func TestBuildRefusesUnreproducedPrompt(t *testing.T) {
	mut := map[string]func(w wire){
		"prompt byte": func(w wire) {
			w["system_prompt"] = strings.Replace(w["system_prompt"].(string), "careful", "Careful", 1)
		},
		"prompt suffix":    func(w wire) { w["system_prompt"] = w["system_prompt"].(string) + "\n" },
		"bootstrap byte":   func(w wire) { w["bootstrap_files"].([]any)[0].(wire)["content"] = "Be carefull.\n" },
		"tool order":       func(w wire) { ts := w["tools"].([]any); ts[0], ts[1] = ts[1], ts[0] },
		"missing file":     func(w wire) { w["bootstrap_files"] = w["bootstrap_files"].([]any)[:1] },
		"prompt truncated": func(w wire) { s := w["system_prompt"].(string); w["system_prompt"] = s[:len(s)-1] },
	}
	for name, m := range mut {
		t.Run(name, func(t *testing.T) {
			w := toyCapture()
			m(w)
			res, err := Build(parse(t, w), toyReleases(), toyFixed)
			if !errors.Is(err, ErrNotReproduced) || res != nil {
				t.Fatalf("got %v, want ErrNotReproduced", err)
			}
		})
	}
}

func TestBuildRefusesFixedText(t *testing.T) {
	c := parse(t, toyCapture())
	for name, f := range map[string]FixedText{
		"modified": {"head": []byte("You are a test agent!\n")},
		"missing":  {},
		"extra":    {"head": toyFixed["head"], "tail": []byte("x")},
		"nil":      nil,
	} {
		if _, err := Build(c, toyReleases(), f); !errors.Is(err, ErrFixedText) {
			t.Fatalf("%s: got %v, want ErrFixedText", name, err)
		}
	}
}

func TestReportCommitsEveryInput(t *testing.T) {
	base, err := NewReport(parse(t, toyCapture()), toyRelease{}.Pinned())
	if err != nil {
		t.Fatal(err)
	}
	baseJCS, err := base.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	mut := map[string]func(w wire){
		"bootstrap byte":   func(w wire) { w["bootstrap_files"].([]any)[1].(wire)["content"] = "Plain!\n" },
		"bootstrap name":   func(w wire) { w["bootstrap_files"].([]any)[1].(wire)["name"] = "USER.md" },
		"tool description": func(w wire) { w["tools"].([]any)[0].(wire)["description"] = "Read one file." },
		"tool schema": func(w wire) {
			w["tools"].([]any)[0].(wire)["parameters"].(wire)["required"] = []any{"path"}
		},
		"tool order":    func(w wire) { ts := w["tools"].([]any); ts[0], ts[1] = ts[1], ts[0] },
		"prompt":        func(w wire) { w["system_prompt"] = w["system_prompt"].(string) + " " },
		"version":       func(w wire) { w["openclaw_version"] = "2026.9.7" },
		"request bytes": func(w wire) { w["request_sha256_b64u"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" },
	}
	for name, m := range mut {
		t.Run(name, func(t *testing.T) {
			w := toyCapture()
			m(w)
			r, err := NewReport(parse(t, w), toyRelease{}.Pinned())
			if err != nil {
				t.Fatal(err)
			}
			j, err := r.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(j, baseJCS) {
				t.Fatal("the report does not change")
			}
		})
	}
	// The fixed text is committed too.
	other := maps.Clone(toyRelease{}.Pinned())
	other["head"] = taggedSHA256([]byte("other"))
	r, _ := NewReport(parse(t, toyCapture()), other)
	if j, _ := r.Canonical(); bytes.Equal(j, baseJCS) {
		t.Fatal("the report does not commit the fixed text")
	}
	// Tool schema changes move only the schema commitments.
	w := toyCapture()
	w["tools"].([]any)[0].(wire)["parameters"].(wire)["required"] = []any{"path"}
	r, _ = NewReport(parse(t, w), toyRelease{}.Pinned())
	if r.Tools.NamesHashB64u != base.Tools.NamesHashB64u || r.Tools.SummariesHash != base.Tools.SummariesHash || r.Tools.SchemasHashB64u == base.Tools.SchemasHashB64u {
		t.Fatal("a schema change must move the schemas commitment only")
	}
}

func FuzzParseCapture(f *testing.F) {
	b, _ := json.Marshal(toyCapture())
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCapture(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidCapture) {
				t.Fatalf("error %v does not wrap ErrInvalidCapture", err)
			}
			return
		}
		if _, err := NewReport(c, nil); err != nil {
			t.Fatalf("NewReport of a parsed capture: %v", err)
		}
		if _, err := Build(c, Supported(), nil); !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("Build: %v", err)
		}
	})
}
