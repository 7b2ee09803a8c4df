package collateral

import (
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// FuzzValidity: whatever a service or a directory holds, judging it never
// panics, and an accepted document has an end of validity no earlier than
// its start (so Check cannot call an inverted window fresh).
func FuzzValidity(f *testing.F) {
	f.Add(0, []byte("not a crl"), []byte(""))
	f.Add(3, []byte(`{"tcbInfo":{"fmspc":"50806f000000","issueDate":"2023-01-01T00:00:00Z","nextUpdate":"2023-02-01T00:00:00Z"}}`), []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"))
	f.Add(4, []byte(`{"enclaveIdentity":{"issueDate":"2023-01-01T00:00:00Z","nextUpdate":"2023-02-01T00:00:00Z"}}`), []byte{})
	f.Add(2, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), []byte{})
	kinds := []Item{
		{Kind: kindSEVSNPCRL},
		{Kind: kindSEVSNPVCEK},
		{Kind: kindSEVSNPChain},
		{Kind: kindTDXTCBInfo, ChainPath: "c", FMSPC: "50806f000000"},
		{Kind: kindTDXQEIdentity, ChainPath: "c"},
		{Kind: kindTDXPCKCRL, ChainPath: "c"},
		{Kind: kindTDXRootCRL},
	}
	f.Fuzz(func(t *testing.T, k int, doc, chain []byte) {
		if k < 0 {
			k = -k
		}
		it := kinds[k%len(kinds)]
		from, until, err := validity(it, doc, chain)
		if err != nil {
			return
		}
		if until.IsZero() {
			t.Fatalf("%s accepted without an end of validity", it.Kind)
		}
		dir := t.TempDir()
		testfile.Write(t, dir, "d", doc)
		if it.ChainPath != "" {
			testfile.Write(t, dir, "c", chain)
		}
		it.Path = "d"
		st := checkOne(dir, it, from, 0)
		if st.State == stateFresh && !from.Before(until) {
			t.Fatalf("inverted window %v..%v called fresh", from, until)
		}
	})
}
