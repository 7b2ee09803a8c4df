package snpevidence_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/abi"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
)

func simEvidence(t testing.TB) *evidence.Evidence {
	t.Helper()
	s, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := evidence.NewReportData([32]byte{1}, ed25519.PublicKey(make([]byte, 32)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func clone(ev *evidence.Evidence) *evidence.Evidence {
	b, _ := json.Marshal(ev)
	var out evidence.Evidence
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return &out
}

func TestGUIDsMatchGoSevGuest(t *testing.T) {
	c := abi.CertsFromProto(&spb.CertificateChain{
		ArkCert: []byte{1}, AskCert: []byte{2}, VcekCert: []byte{3}, VlekCert: []byte{4},
	})
	want := [][16]byte{snpevidence.GUIDARK, snpevidence.GUIDASK, snpevidence.GUIDVCEK, snpevidence.GUIDVLEK}
	if len(c.Entries) != len(want) {
		t.Fatal(len(c.Entries))
	}
	for i, e := range c.Entries {
		if [16]byte(e.GUID) != want[i] {
			t.Errorf("guid %d = %x, want %x", i, e.GUID, want[i])
		}
	}
}

func TestParseAcceptsSimEvidenceAndRoundTrips(t *testing.T) {
	ev := simEvidence(t)
	p, err := snpevidence.Parse(ev)
	if err != nil {
		t.Fatal(err)
	}
	if p.Signer != abi.VcekReportSigner || p.Intermediate == nil || p.Root == nil || !p.Simulated {
		t.Fatalf("parsed %+v", p)
	}
	a, _ := json.Marshal(ev)
	b, _ := json.Marshal(p.Evidence())
	if !bytes.Equal(a, b) {
		t.Fatal("re-encoding differs")
	}
	// go-sev-guest reads the same table the same way.
	att, err := abi.ReportCertsToProto(append(bytes.Clone(ev.Blob), ev.Aux[snpevidence.AuxCertTable]...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(att.GetCertificateChain().GetVcekCert(), ev.CertChain[0]) ||
		!bytes.Equal(att.GetCertificateChain().GetAskCert(), ev.CertChain[1]) ||
		!bytes.Equal(att.GetCertificateChain().GetArkCert(), ev.CertChain[2]) {
		t.Fatal("go-sev-guest reads the table differently")
	}
}

func TestParseRejects(t *testing.T) {
	good := simEvidence(t)
	p, _ := snpevidence.Parse(good)
	otherKey := p.Intermediate.Raw // an RSA certificate

	cases := []struct {
		name   string
		mutate func(ev *evidence.Evidence)
		want   error
	}{
		{"nil", nil, snpevidence.ErrMalformedEvidence},
		{"platform", func(ev *evidence.Evidence) { ev.Platform = evidence.PlatformTDX }, snpevidence.ErrUnknownFormat},
		{"format", func(ev *evidence.Evidence) { ev.Format = "sev-snp/attestation-report-v2" }, snpevidence.ErrUnknownFormat},
		{"signature field", func(ev *evidence.Evidence) { ev.Signature = []byte{1} }, snpevidence.ErrMalformedEvidence},
		{"short blob", func(ev *evidence.Evidence) { ev.Blob = ev.Blob[:100] }, snpevidence.ErrMalformedEvidence},
		{"long blob", func(ev *evidence.Evidence) { ev.Blob = append(ev.Blob, 0) }, snpevidence.ErrMalformedEvidence},
		{"version 1", func(ev *evidence.Evidence) { binary.LittleEndian.PutUint32(ev.Blob, 1) }, snpevidence.ErrMalformedEvidence},
		{"version 6", func(ev *evidence.Evidence) { binary.LittleEndian.PutUint32(ev.Blob, 6) }, snpevidence.ErrMalformedEvidence},
		{"policy reserved bit", func(ev *evidence.Evidence) { ev.Blob[0x0a] &^= 0x02 }, snpevidence.ErrMalformedEvidence},
		{"signature algo", func(ev *evidence.Evidence) { ev.Blob[0x34] = 2 }, snpevidence.ErrMalformedEvidence},
		{"unsigned report", func(ev *evidence.Evidence) { ev.Blob[0x48] = 7 << 2 }, snpevidence.ErrMalformedEvidence},
		{"mbz", func(ev *evidence.Evidence) { ev.Blob[0x4c] = 1 }, snpevidence.ErrMalformedEvidence},
		{"no chain", func(ev *evidence.Evidence) { ev.CertChain = nil; ev.Aux = nil }, snpevidence.ErrMalformedEvidence},
		{"long chain", func(ev *evidence.Evidence) { ev.CertChain = append(ev.CertChain, ev.CertChain[0]); ev.Aux = nil }, snpevidence.ErrMalformedEvidence},
		{"garbage cert", func(ev *evidence.Evidence) { ev.CertChain[0] = []byte{0x30, 0}; ev.Aux = nil }, snpevidence.ErrMalformedEvidence},
		{"empty cert", func(ev *evidence.Evidence) { ev.CertChain[1] = nil; ev.Aux = nil }, snpevidence.ErrMalformedEvidence},
		{"rsa leaf", func(ev *evidence.Evidence) { ev.CertChain = [][]byte{otherKey}; ev.Aux = nil }, snpevidence.ErrMalformedEvidence},
		{"chain not table", func(ev *evidence.Evidence) { ev.CertChain = ev.CertChain[:1] }, snpevidence.ErrMalformedEvidence},
		{"chain reordered", func(ev *evidence.Evidence) {
			ev.CertChain[1], ev.CertChain[2] = ev.CertChain[2], ev.CertChain[1]
		}, snpevidence.ErrMalformedEvidence},
		{"unknown aux", func(ev *evidence.Evidence) { ev.Aux["event_log"] = []byte{1} }, snpevidence.ErrMalformedEvidence},
		{"empty table", func(ev *evidence.Evidence) { ev.Aux[snpevidence.AuxCertTable] = nil }, snpevidence.ErrMalformedCertTable},
		{"table trailing byte", func(ev *evidence.Evidence) {
			ev.Aux[snpevidence.AuxCertTable] = append(ev.Aux[snpevidence.AuxCertTable], 0)
		}, snpevidence.ErrMalformedCertTable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ev *evidence.Evidence
			if tc.mutate != nil {
				ev = clone(good)
				tc.mutate(ev)
			}
			p, err := snpevidence.Parse(ev)
			if !errors.Is(err, tc.want) || p != nil {
				t.Fatalf("Parse = %v, %v; want %v", p, err, tc.want)
			}
		})
	}
}

func TestParseWithoutTable(t *testing.T) {
	ev := clone(simEvidence(t))
	ev.Aux = nil
	for n := 1; n <= 3; n++ {
		e := clone(ev)
		e.CertChain = e.CertChain[:n]
		p, err := snpevidence.Parse(e)
		if err != nil {
			t.Fatalf("%d certs: %v", n, err)
		}
		if (p.Intermediate != nil) != (n > 1) || (p.Root != nil) != (n > 2) {
			t.Fatalf("%d certs: roles wrong", n)
		}
	}
}

func TestBuild(t *testing.T) {
	ev := simEvidence(t)
	leaf := ev.CertChain[0]
	if _, err := snpevidence.Build(ev.Blob, nil, nil, false); !errors.Is(err, snpevidence.ErrNoEndorsementCert) {
		t.Fatalf("no certs: %v", err)
	}
	got, err := snpevidence.Build(ev.Blob, nil, leaf, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.CertChain) != 1 || got.Aux != nil || got.Simulated {
		t.Fatalf("endorsement only: %+v", got)
	}
	// A table without the leaf gets it appended.
	table, _ := snpevidence.MarshalCertTable([]snpevidence.CertTableEntry{{GUID: snpevidence.GUIDASK, Data: ev.CertChain[1]}})
	got, err = snpevidence.Build(ev.Blob, table, leaf, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.CertChain) != 2 || !bytes.Equal(got.CertChain[0], leaf) {
		t.Fatal("leaf not added to the table")
	}
	if _, err := snpevidence.Build(ev.Blob[:10], nil, leaf, false); !errors.Is(err, snpevidence.ErrMalformedEvidence) {
		t.Fatalf("short report: %v", err)
	}
}

func TestAttestation(t *testing.T) {
	ev := simEvidence(t)
	p, _ := snpevidence.Parse(ev)
	entries := append(p.CertTable, snpevidence.CertTableEntry{GUID: [16]byte{0xec, 0xae, 1}, Data: []byte{9}})
	table, err := snpevidence.MarshalCertTable(entries)
	if err != nil {
		t.Fatal(err)
	}
	ev2, err := snpevidence.Build(ev.Blob, table, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := snpevidence.Parse(ev2)
	a, err := p2.Attestation()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.GetCertificateChain().GetExtras()["ecae0100-0000-0000-0000-000000000000"], []byte{9}) {
		t.Fatalf("extras = %v", a.GetCertificateChain().GetExtras())
	}
	raw, err := abi.ReportToAbiBytes(a.GetReport())
	if err != nil || !bytes.Equal(raw, ev.Blob) {
		t.Fatal("attestation report does not re-encode to the blob")
	}
	if _, err := x509.ParseCertificate(a.GetCertificateChain().GetVcekCert()); err != nil {
		t.Fatal(err)
	}
}

func entryHeader(guid [16]byte, off, n uint32) []byte {
	h := make([]byte, 24)
	copy(h, guid[:])
	binary.LittleEndian.PutUint32(h[16:], off)
	binary.LittleEndian.PutUint32(h[20:], n)
	return h
}

func TestCertTable(t *testing.T) {
	entries := []snpevidence.CertTableEntry{
		{GUID: snpevidence.GUIDARK, Data: []byte("ark")},
		{GUID: snpevidence.GUIDVCEK, Data: []byte("vcek!")},
	}
	enc, err := snpevidence.MarshalCertTable(entries)
	if err != nil {
		t.Fatal(err)
	}
	got, err := snpevidence.ParseCertTable(enc)
	if err != nil || len(got) != 2 || string(got[1].Data) != "vcek!" {
		t.Fatalf("ParseCertTable = %v, %v", got, err)
	}
	// Host layout: padding and a gap are accepted by CanonicalCertTable
	// only, which re-encodes canonically.
	host := append(entryHeader(snpevidence.GUIDVCEK, 80, 5), entryHeader(snpevidence.GUIDARK, 72, 3)...)
	host = append(host, make([]byte, 24)...)
	host = append(host, make([]byte, 100)...)
	copy(host[72:], "ark")
	copy(host[80:], "vcek!")
	if _, err := snpevidence.ParseCertTable(host); !errors.Is(err, snpevidence.ErrMalformedCertTable) {
		t.Fatalf("strict parse of host layout: %v", err)
	}
	canon, err := snpevidence.CanonicalCertTable(host)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := snpevidence.ParseCertTable(canon); err != nil || string(got[0].Data) != "vcek!" || string(got[1].Data) != "ark" {
		t.Fatalf("canonical = %v, %v", got, err)
	}
	if c, err := snpevidence.CanonicalCertTable(make([]byte, 4096)); c != nil || err != nil {
		t.Fatalf("all-zero table = %v, %v", c, err)
	}

	bad := map[string][]byte{
		"empty":           nil,
		"unterminated":    entryHeader(snpevidence.GUIDVCEK, 48, 1),
		"only terminator": make([]byte, 24),
		"out of bounds":   append(append(entryHeader(snpevidence.GUIDVCEK, 48, 10), make([]byte, 24)...), 1),
		"overflow":        append(append(entryHeader(snpevidence.GUIDVCEK, 0xffffffff, 2), make([]byte, 24)...), 1, 2),
		"into header":     append(append(entryHeader(snpevidence.GUIDVCEK, 0, 1), make([]byte, 24)...), 1),
		"zero length":     append(entryHeader(snpevidence.GUIDVCEK, 48, 0), make([]byte, 24)...),
		"duplicate": func() []byte {
			b := append(entryHeader(snpevidence.GUIDVCEK, 72, 1), entryHeader(snpevidence.GUIDVCEK, 73, 1)...)
			return append(append(b, make([]byte, 24)...), 1, 2)
		}(),
		"too large": make([]byte, snpevidence.MaxCertTableSize+1),
	}
	for name, b := range bad {
		if _, err := snpevidence.ParseCertTable(b); !errors.Is(err, snpevidence.ErrMalformedCertTable) {
			t.Errorf("%s: ParseCertTable = %v", name, err)
		}
		if name != "empty" && name != "only terminator" {
			if _, err := snpevidence.CanonicalCertTable(b); name != "too large" && !errors.Is(err, snpevidence.ErrMalformedCertTable) {
				t.Errorf("%s: CanonicalCertTable = %v", name, err)
			}
		}
	}
	many := make([]snpevidence.CertTableEntry, snpevidence.MaxCertTableEntries+1)
	for i := range many {
		many[i] = snpevidence.CertTableEntry{GUID: [16]byte{byte(i + 1)}, Data: []byte{1}}
	}
	if _, err := snpevidence.MarshalCertTable(many); !errors.Is(err, snpevidence.ErrMalformedCertTable) {
		t.Errorf("too many entries: %v", err)
	}
}

// Parse shares the evidence's bytes (Parsed says so); Build must not share
// its caller's: evidence built from buffers the caller then reuses stays
// as built.
func TestBuildCopiesItsInputs(t *testing.T) {
	ev := simEvidence(t)
	report := bytes.Clone(ev.Blob)
	table := bytes.Clone(ev.Aux[snpevidence.AuxCertTable])
	got, err := snpevidence.Build(report, table, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	want := clone(got)
	clear(report)
	clear(table)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the built evidence changed with the caller's buffers")
	}
	if _, err := snpevidence.Parse(got); err != nil {
		t.Fatal(err)
	}
}
