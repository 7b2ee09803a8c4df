package sim

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// TestRegenerateSimRoots rewrites simroots/sevsnp_cert_chain.pem. It runs
// only with CLAWEA_REGEN_SIMROOTS=1; afterwards update the digests in
// simroots.go and docs/spec/platform-sevsnp.md (TestSimRootsPinned prints
// them). Regenerating changes the pinned roots: do it only on purpose.
func TestRegenerateSimRoots(t *testing.T) {
	if os.Getenv("CLAWEA_REGEN_SIMROOTS") != "1" {
		t.Skip("set CLAWEA_REGEN_SIMROOTS=1 to regenerate the simulated roots")
	}
	arkDER, askDER, err := generateRoots()
	if err != nil {
		t.Fatal(err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: askDER})
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: arkDER})...)
	if err := os.WriteFile(filepath.Join("simroots", "sevsnp_cert_chain.pem"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}
