package gate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/decisions.golden.jsonl")

// TestDecisionsGolden pins the decisions and the exact audit bytes of a
// fixed sequence of calls (allow, policy deny, verification gate deny and
// allow, malformed input, parameters in every JSON shape), so that speed
// work on the decision path cannot change either. The golden file was
// written by the implementation before that work.
func TestDecisionsGolden(t *testing.T) {
	cfg := mustParse(t, `{"tools":{"profile":"coding","allow":["group:fs","group:runtime","web_*"],"deny":["process"]},`+
		`"agents":{"defaults":{"sig":{"enforceVerification":true}}}}`)
	g := newTestGate(t, cfg)
	calls := []struct {
		tool, params string
		allow        bool
	}{
		{"read", `{"path":"/workspace/README.md","offset":0,"limit":200}`, true},
		{"process", `{}`, false},
		{"exec", `{"command":"ls -la","workdir":"/workspace"}`, false},
		{"verify", ``, true},
		{"read", ` { "b" : [ 1 , 2.50, 0, 1e3 ] , "a" : "x\/y\u0041\u00e9\u2028\n\t\"\\\u001f\u007f\ud83d\ude00" } `, true},
		{"read", `{"a":1,"a":2}`, false},
		{"read", `{"z":-0}`, false},
		{"Bash", `[1]`, false},
		{"web_fetch", `{"url":"https://example.com/?q=<&>"}`, false},
	}
	var out bytes.Buffer
	if err := g.OpenRun("run-1"); err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		if i == 3 {
			if err := g.NewTurn("run-1", "turn-1", true); err != nil {
				t.Fatal(err)
			}
		}
		if i == 4 {
			if err := g.MarkVerified("run-1", "turn-1", VerifiedTemplates); err != nil {
				t.Fatal(err)
			}
		}
		cl := call(c.tool)
		cl.Params = []byte(c.params)
		d, _ := g.Decide(t.Context(), cl)
		if d.Allow != c.allow {
			t.Fatalf("call %d (%s): allow %v, want %v: %s", i, c.tool, d.Allow, c.allow, d.Reason)
		}
	}
	out.Write(g.audit.Bytes())
	path := filepath.Join("testdata", "decisions.golden.jsonl")
	if *updateGolden {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("audit bytes differ from %s:\n%s", path, out.Bytes())
	}
	g.verifyAudit(t, uint64(len(calls)))
}
