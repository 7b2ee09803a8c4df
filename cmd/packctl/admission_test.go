package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/promptpack/admission"
)

// TestBuildAdmissionVectors runs every admission vector of
// promptpack/admission/testdata through `packctl build --admission`: an
// admitted pack is written (exit 0), a refused one is not (exit 4) and
// stderr names the rule and the input. Vectors that change the pack's
// recipe cannot be built (build knows one recipe) and are left to the
// package tests.
func TestBuildAdmissionVectors(t *testing.T) {
	harness := packtest.Dir(t)
	vdir := packtest.AdmissionDir()
	read := func(name string) []byte {
		return testfile.Read(t, filepath.Join(vdir, name))
	}
	vectors := packtest.AdmitVectors(t)
	ran := 0
	for _, v := range vectors {
		if _, ok := v.Pack["recipe"]; ok {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			dir := t.TempDir()
			var params map[string]any
			if err := json.Unmarshal(read("base.params.json"), &params); err != nil {
				t.Fatal(err)
			}
			for k, x := range v.Set {
				params[k] = x
			}
			write := func(name string, x any) string {
				b := testjson.Marshal(t, x)
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			}
			var schemas, env any
			json.Unmarshal(read("base.tool_schemas.json"), &schemas)
			json.Unmarshal(read("base.skills_env.json"), &env)
			if x, ok := v.Pack["tool_schemas"]; ok {
				schemas = x
			}
			if x, ok := v.Pack["skills_env_overrides"]; ok {
				env = x
			}
			out := filepath.Join(dir, "pack.json")
			args := []string{"build", "--admission", filepath.Join(vdir, v.Policy),
				"--params", write("params.json", params), "--harness", harness,
				"--tool-schemas", write("schemas.json", schemas), "-o", out}
			if env != nil {
				args = append(args, "--skills-env", write("env.json", env))
			}
			var stdout, stderr bytes.Buffer
			code := run(args, nil, &stdout, &stderr)
			if v.Rule == "" {
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, stderr.String())
				}
				if _, err := os.Stat(out); err != nil {
					t.Fatal("admitted pack not written")
				}
				return
			}
			if code != exitPolicy {
				t.Fatalf("exit %d, want %d: %s", code, exitPolicy, stderr.String())
			}
			want := v.Rule + `: "` + v.Input + `"`
			if !strings.Contains(stderr.String(), want) {
				t.Fatalf("stderr %q does not name %s", stderr.String(), want)
			}
			if stdout.Len() != 0 {
				t.Fatal("output on stdout")
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("refused pack written (%v)", err)
			}
		})
		ran++
	}
	if ran < 30 {
		t.Fatalf("ran %d vectors", ran)
	}
}

// TestAdmissionExit pins the documented exit codes of build --admission.
func TestAdmissionExit(t *testing.T) {
	if got := admissionExit(&admission.RuleError{Rule: "BOOTSTRAP_PATH_NOT_ALLOWED", Input: "bootstrap:x"}); got != exitPolicy {
		t.Errorf("refusal: exit %d", got)
	}
	if got := admissionExit(fmt.Errorf("x: %w", admission.ErrUnreadable)); got != exitRejected {
		t.Errorf("uncheckable: exit %d", got)
	}
}
