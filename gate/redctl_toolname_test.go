package gate

import (
	"errors"
	"testing"
)

// TestNonASCIIToolNamesAttack: a tool name that Go's case mapping or
// trimming turns into an ASCII tool name (U+0130 before "mage" becomes
// "image", the Kelvin sign K becomes k, a leading U+0085 is trimmed) is not
// that tool: OpenClaw's JavaScript normalization gives another name, so the
// gate would decide and record a tool OpenClaw does not run. Such a call is
// malformed (stage input) and a configuration entry is refused; ASCII case
// and whitespace still normalize.
func TestNonASCIIToolNamesAttack(t *testing.T) {
	g := newTestGate(t, mustParse(t, `{"tools":{"deny":["exec"]}}`))
	for _, name := range []string{"\u0130mage", "\u212Aill", "\u0085read", "read\u00a0", "\u0130MAGE", "re\u0430d"} {
		d, err := g.Decide(t.Context(), call(name))
		if d.Allow || d.Stage != stageInput || d.Tool != "" || !errors.Is(err, errInvalidCall) {
			t.Errorf("%q: %+v %v", name, d, err)
		}
	}
	for name, want := range map[string]string{" READ\t": "read", "Image": "image", "BASH": "exec"} {
		d := g.decide(t, call(name))
		if d.Tool != want || d.Stage == stageInput {
			t.Errorf("%q: %+v, want tool %q", name, d, want)
		}
	}
	if d := g.decide(t, call(" EXEC ")); d.Allow || d.Stage != stagePolicy {
		t.Errorf("EXEC with exec denied: %+v", d)
	}
	g.verifyAudit(t, 10)
	for _, doc := range []string{`{"tools":{"deny":["\u0130mage"]}}`, `{"tools":{"allow":["\u212Aill"]}}`} {
		if _, err := ParseConfig([]byte(doc), ParseOptions{}); !errors.Is(err, errBadValue) {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
