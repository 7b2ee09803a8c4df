package gate

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/clawea/attester/gate/internal/ockeys"
	"github.com/clawea/attester/internal/octest"
	"github.com/clawea/attester/schema/confdoc"
)

// TestOpenClawTyposRefused: a typo in a section the gate reads is refused
// with its path, also when the gate reads its keys out of a full OpenClaw
// config (AllowForeignKeys). Before, each of these started the gate with
// the control silently off (issue 18).
func TestOpenClawTyposRefused(t *testing.T) {
	for _, tc := range []struct{ doc, key string }{
		{`{"agents":{"default":{"sig":{"enforceVerification":true}}},"tools":{"denny":["exec"]}}`, "agents.default"},
		{`{"tools":{"denny":["exec"]}}`, "tools.denny"},
		{`{"tools":{"verfier":{"enabled":true}}}`, "tools.verfier"},
		{`{"tools":{"profle":"minimal"}}`, "tools.profle"},
		{`{"agents":{"default":{"sig":{"enforceVerification":true}}}}`, "agents.default"},
		{`{"agents":{"defaults":{"sigg":{"enforceVerification":true}}}}`, "agents.defaults.sigg"},
		{`{"agents":{"list":[{"id":"a","tool":{"deny":["exec"]}}]}}`, "agents.list[0].tool"},
		{`{"agents":{"list":[{"id":"a","tools":{"denny":["exec"]}}]}}`, "agents.list[0].tools.denny"},
		{`{"agents":{"defaults":{"Sig":{}}}}`, "agents.defaults.Sig"},
	} {
		for _, opts := range []ParseOptions{{}, {AllowForeignKeys: true}} {
			c, err := ParseConfig([]byte(tc.doc), opts)
			ce, ok := errors.AsType[*confdoc.ConfigError](err)
			if c != nil || !ok || ce.Key != tc.key || !errors.Is(err, errUnknownKey) || !errors.Is(err, errInvalidConfig) {
				t.Errorf("%s (foreign %t): %v, want %s refused as an unknown key", tc.doc, opts.AllowForeignKeys, err, tc.key)
			}
		}
	}
	// The keys OpenClaw itself declares there are passed over.
	doc := `{"gateway":{},"agents":{"entries":{},"defaults":{"model":"x","workspace":"/w"},
		"list":[{"id":"a","workspace":"/w","tools":{"elevated":{},"exec":{}}}]},"tools":{"web":{},"exec":{}}}`
	if _, err := ParseConfig([]byte(doc), ParseOptions{AllowForeignKeys: true}); err != nil {
		t.Fatalf("OpenClaw keys refused: %v", err)
	}
}

// TestOneRangeViolation: a value out of its declared range is refused with
// its path.
func TestOneRangeViolation(t *testing.T) {
	_, err := ParseConfig([]byte(`{"tools":{"verifier":{"telegram":{"timeout":3601}}}}`), ParseOptions{})
	ce, ok := errors.AsType[*confdoc.ConfigError](err)
	if !ok || ce.Key != "tools.verifier.telegram.timeout" || !errors.Is(err, errBadValue) {
		t.Fatalf("%v", err)
	}
}

// TestInstalledOpenClawConfigKeys: the checked-in openClawKeys are what the
// supported release's own config schema declares (regenerate with
// `go generate ./gate`). It needs an install (CLAWEA_OPENCLAW_DIR; see
// internal/octest).
func TestInstalledOpenClawConfigKeys(t *testing.T) {
	if openClawRelease != ockeys.Release {
		t.Fatalf("openclawrelease.go is for %s, the supported release is %s: run go generate ./gate", openClawRelease, ockeys.Release)
	}
	dir := octest.Install(t)
	got, err := ockeys.Keys(dir, os.Getenv("CLAWEA_NODE_BIN"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(openClawKeys) {
		t.Fatalf("sections %d, checked in %d: run go generate ./gate", len(got), len(openClawKeys))
	}
	for name, keys := range got {
		if !slices.Equal(keys, openClawKeys[name]) {
			t.Errorf("section %s: the install declares %v, checked in %v: run go generate ./gate", name, keys, openClawKeys[name])
		}
	}
}
