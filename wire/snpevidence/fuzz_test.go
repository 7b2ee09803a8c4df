package snpevidence_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/clawea/attester/internal/fuzzcheck"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
)

// FuzzParseCertTable: whatever ParseCertTable accepts re-encodes to the
// identical bytes; CanonicalCertTable output is itself canonical.
func FuzzParseCertTable(f *testing.F) {
	f.Add([]byte{})
	tab, _ := snpevidence.MarshalCertTable([]snpevidence.CertTableEntry{
		{GUID: snpevidence.GUIDVCEK, Data: []byte("leaf")},
		{GUID: snpevidence.GUIDASK, Data: []byte("ask")},
	})
	f.Add(tab)
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzcheck.RoundTrip(t, b, snpevidence.ParseCertTable, snpevidence.MarshalCertTable)
		canon, err := snpevidence.CanonicalCertTable(b)
		if err != nil || canon == nil {
			return
		}
		again, err := snpevidence.ParseCertTable(canon)
		if err != nil {
			t.Fatalf("canonical table rejected: %v", err)
		}
		out, _ := snpevidence.MarshalCertTable(again)
		if !bytes.Equal(out, canon) {
			t.Fatal("canonical table is not a fixed point")
		}
	})
}

// FuzzParseEvidence: Parse never panics, returns nothing on error, and what
// it accepts re-encodes (as JSON, the wire form) to the same bytes.
func FuzzParseEvidence(f *testing.F) {
	ev := simEvidence(f)
	good, _ := json.Marshal(ev)
	f.Add(good)
	noTable := *ev
	noTable.Aux = nil
	b, _ := json.Marshal(&noTable)
	f.Add(b)
	f.Add([]byte(`{"platform":"sev-snp","format":"sev-snp/attestation-report"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256<<10 {
			return
		}
		var ev evidence.Evidence
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		p, err := snpevidence.Parse(&ev)
		if err != nil {
			if p != nil {
				t.Fatal("parsed value returned with an error")
			}
			return
		}
		want, _ := json.Marshal(&ev)
		got, _ := json.Marshal(p.Evidence())
		if !bytes.Equal(want, got) {
			t.Fatalf("re-encoding differs:\n%s\n%s", want, got)
		}
		if _, err := snpevidence.Parse(p.Evidence()); err != nil {
			t.Fatalf("re-encoded evidence rejected: %v", err)
		}
		if _, err := p.Attestation(); err != nil {
			t.Fatalf("accepted evidence has no attestation: %v", err)
		}
	})
}
