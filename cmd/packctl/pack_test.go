package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/sealed"
)

// TestPackExit pins the documented exit codes of the pack commands.
func TestPackExit(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&openclawsig.TemplateError{Name: "a.txt", Err: openclawsig.ErrTemplateUntrusted}, exitPolicy},
		{&openclawsig.TemplateError{Name: "a.txt", Err: openclawsig.ErrTemplateModified}, exitRejected},
		{fmt.Errorf("x: %w", promptpack.ErrUnknownRecipe), exitCannot},
		{fmt.Errorf("x: %w", envelope.ErrNoMatchingRecipient), exitCannot},
		{fmt.Errorf("x: %w", sealed.ErrLockFailed), exitCannot},
		{fmt.Errorf("x: %w", envelope.ErrAuthentication), exitRejected},
		{fmt.Errorf("x: %w", envelope.ErrManifestMismatch), exitRejected},
		{promptpack.ErrReportMismatch, exitRejected},
		{promptpack.ErrUnknownVersion, exitRejected},
	} {
		if got := packExit(tc.err); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestSealExits runs seal's steps to their exit codes: usage errors (1),
// a file that is not a pack (2), an unreadable pack or output (3), and a
// seal that writes both files and prints the pack id.
func TestSealExits(t *testing.T) {
	pp := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	defer pp.Pack.Wipe()
	enc, err := pp.Pack.Encode()
	if err != nil {
		t.Fatal(err)
	}
	key, err := envelope.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pack := filepath.Join(dir, "pack.json")
	testfile.Write(t, dir, "pack.json", enc)
	testfile.Write(t, dir, "notpack.json", []byte(`{"a":1}`))
	pub := key.Public().String()
	out := func(name string) []string {
		return []string{"-o", filepath.Join(dir, name+".enc"), "--manifest", filepath.Join(dir, name+".json")}
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"policy without attester", append([]string{"--recipient", pub, "--policy", "p.json", pack}, out("a")...), exitUsage, "--policy is for --attester"},
		{"bad recipient", append([]string{"--recipient", "clawea-promptpack-v1-pub:AAAA", pack}, out("b")...), exitUsage, "seal: "},
		{"missing pack", append([]string{"--recipient", pub, filepath.Join(dir, "missing.json")}, out("c")...), exitCannot, "missing.json"},
		{"not a pack", append([]string{"--recipient", pub, filepath.Join(dir, "notpack.json")}, out("d")...), exitRejected, "notpack.json"},
		{"unwritable envelope", []string{"--recipient", pub, "-o", filepath.Join(dir, "nodir", "x.enc"), "--manifest", filepath.Join(dir, "e.json"), pack}, exitCannot, "nodir"},
		{"sealed", append([]string{"--recipient", pub, pack}, out("f")...), exitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, so, se := runCmd(append([]string{"seal"}, tc.args...)...)
			if code != tc.code || !strings.Contains(se, tc.msg) {
				t.Fatalf("exit %d, stderr %q; want %d with %q", code, se, tc.code, tc.msg)
			}
			if code == exitOK && !strings.HasPrefix(so, "pack_id: "+pp.Rebuilt.PackID+"\nreport_hash_b64u: "+pp.Rebuilt.ReportHashB64u()+"\n") {
				t.Fatalf("stdout %q", so)
			}
		})
	}
	for _, name := range []string{"f.enc", "f.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}
