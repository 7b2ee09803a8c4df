package teeclaims_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/clawea/attester/wire/tdxsimroots"
	"github.com/clawea/attester/wire/teeclaims"
)

func reportData(t testing.TB, n byte) evidence.ReportData {
	t.Helper()
	rd, err := evidence.NewReportData([32]byte{n}, ed25519.PublicKey(bytes.Repeat([]byte{7}, 32)), []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// simSNPClaims returns simulated SEV-SNP evidence for reportData(t, n)
// and the claims Derive derives from it.
func simSNPClaims(t *testing.T, n byte) (*evidence.Evidence, *teeclaims.Claims) {
	t.Helper()
	s, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.Quote(context.Background(), reportData(t, n))
	if err != nil {
		t.Fatal(err)
	}
	want, err := teeclaims.Derive(ev)
	if err != nil {
		t.Fatal(err)
	}
	return ev, want
}

// tpmQuote marshals a TPMS_ATTEST of type quote. It is not signed: claims
// derivation checks structure only (signatures are verify's job).
func tpmQuote(extra []byte, fw uint64, digest []byte) []byte {
	return tpm2.Marshal(&tpm2.TPMSAttest{
		Magic:           tpm2.TPMGeneratedValue,
		Type:            tpm2.TPMSTAttestQuote,
		QualifiedSigner: tpm2.TPM2BName{Buffer: append([]byte{0, 0xb}, make([]byte, 32)...)},
		ExtraData:       tpm2.TPM2BData{Buffer: extra},
		FirmwareVersion: fw,
		Attested: tpm2.NewTPMUAttest(tpm2.TPMSTAttestQuote, &tpm2.TPMSQuoteInfo{
			PCRSelect: tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{Hash: tpm2.TPMAlgSHA256, PCRSelect: []byte{0xff, 0, 0}}}},
			PCRDigest: tpm2.TPM2BDigest{Buffer: digest},
		}),
	})
}

// simQuoter is a simulator: it quotes, and reports the measurement the
// claims must carry.
type simQuoter interface {
	enclave.Quoter
	enclave.Measurer
}

// deriveSim quotes rd on q and checks the claims Derive gives: typ, root,
// q's measurement, the TCB version tcb, and the report data.
func deriveSim(t *testing.T, q simQuoter, rd evidence.ReportData, typ, root, tcb string) (*evidence.Evidence, *teeclaims.Claims) {
	t.Helper()
	ctx := context.Background()
	ev, err := q.Quote(ctx, rd)
	if err != nil {
		t.Fatal(err)
	}
	c, err := teeclaims.Derive(ev)
	if err != nil {
		t.Fatal(err)
	}
	meas, _ := q.LaunchMeasurement(ctx)
	if c.AttestationType != typ || c.RootID != root || c.TCBVersion != tcb || !bytes.Equal(c.Measurement, meas) {
		t.Fatalf("%s claims %+v", typ, c)
	}
	if err := teeclaims.CheckReportData(ev, c, rd); err != nil {
		t.Fatal(err)
	}
	return ev, c
}

// The TCB versions the simulators report: sim's Milan level (bootloader 3,
// SNP 8, microcode 115) as the 64-bit TCB_VERSION in hex, and fakeqe's
// default TEE_TCB_SVN.
const (
	simSNPTCB = "7308000000000003"
	simTDXTCB = "03010200000000000000000000000000"
)

func TestDerive(t *testing.T) {
	rd := reportData(t, 1)
	s, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, c := deriveSim(t, s, rd, teeclaims.TypeSEVSNP, "sev-snp:amd-ark-Milan:SIMULATED", simSNPTCB)
	if err := teeclaims.CheckReportData(ev, c, reportData(t, 2)); !errors.Is(err, teeclaims.ErrEvidence) {
		t.Fatalf("other report data: %v", err)
	}
	// Not simulated: no suffix (the flag is what a verifier keys on).
	ev.Simulated = false
	if c, _ := teeclaims.Derive(ev); c.RootID != "sev-snp:amd-ark-Milan" {
		t.Fatalf("root id %s", c.RootID)
	}

	q, err := tdx.NewSimulated(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tev, _ := deriveSim(t, q, rd, teeclaims.TypeTDX, "tdx:root-sha256-"+tdxsimroots.RootSHA256+":SIMULATED", simTDXTCB)
	// A TD carries its CC event log (platform-tdx.md: aux absent or only
	// event_log); any other aux field, or a signature, is refused.
	tev.Aux = map[string][]byte{"event_log": {1}}
	if _, err := teeclaims.Derive(tev); err != nil {
		t.Fatalf("tdx evidence with its event log: %v", err)
	}
	for _, bad := range []func(*evidence.Evidence){
		func(e *evidence.Evidence) { e.Aux["ak_public"] = []byte{1} },
		func(e *evidence.Evidence) { e.Signature = []byte{1} },
	} {
		e := *tev
		e.Aux = maps.Clone(tev.Aux)
		bad(&e)
		if _, err := teeclaims.Derive(&e); !errors.Is(err, teeclaims.ErrEvidence) {
			t.Fatalf("tdx evidence with aux %v, signature %x: %v", e.Aux, e.Signature, err)
		}
	}
	// A chain cut short, and one of the same length with another root.
	full := tev.CertChain
	other := slices.Clone(full)
	other[len(other)-1] = append(slices.Clone(other[len(other)-1]), 0)
	for _, chain := range [][][]byte{full[:2], other} {
		tev.CertChain = chain
		if _, err := teeclaims.Derive(tev); !errors.Is(err, teeclaims.ErrEvidence) {
			t.Fatalf("chain of %d certificates differing from the quote: %v", len(chain), err)
		}
	}
}

func TestDeriveTPM(t *testing.T) {
	rd := reportData(t, 1)
	q := rd.QualifyingData()
	digest := sha256.Sum256([]byte("pcrs"))
	ak := []byte("TPMT_PUBLIC bytes")
	ev := &evidence.Evidence{Platform: "tpm", Format: "tpm2/quote", Blob: tpmQuote(q[:], 0x0102030405060708, digest[:]), Signature: []byte{1},
		Aux: map[string][]byte{"ak_public": ak}}
	c, err := teeclaims.Derive(ev)
	if err != nil {
		t.Fatal(err)
	}
	akDigest := sha256.Sum256(ak)
	if c.AttestationType != teeclaims.TypeGeneric || c.RootID != "tpm:ak-name-000b"+hex.EncodeToString(akDigest[:]) ||
		c.TCBVersion != "0102030405060708" || !bytes.Equal(c.Measurement, digest[:]) {
		t.Fatalf("tpm claims %+v", c)
	}
	if err := teeclaims.CheckReportData(ev, c, rd); err != nil {
		t.Fatal(err)
	}
	if err := teeclaims.CheckReportData(ev, c, reportData(t, 2)); !errors.Is(err, teeclaims.ErrEvidence) {
		t.Fatalf("other qualifying data: %v", err)
	}
	delete(ev.Aux, "ak_public")
	if _, err := teeclaims.Derive(ev); !errors.Is(err, teeclaims.ErrEvidence) {
		t.Fatalf("no ak_public: %v", err)
	}
}

func TestDeriveRejects(t *testing.T) {
	for name, ev := range map[string]*evidence.Evidence{
		"nil":              nil,
		"unknown platform": {Platform: "sgx", Format: "sgx/quote", Blob: []byte{1}},
		"wrong format":     {Platform: "tdx", Format: "sev-snp/attestation-report", Blob: []byte{1}},
		"short sev report": {Platform: "sev-snp", Format: "sev-snp/attestation-report", Blob: []byte{1}, CertChain: [][]byte{{1}}},
		"short tdx quote":  {Platform: "tdx", Format: "tdx/quote-v4", Blob: []byte{1}},
		"garbage tpm":      {Platform: "tpm", Format: "tpm2/quote", Blob: []byte{1, 2, 3}, Aux: map[string][]byte{"ak_public": {1}}},
		"tpm not a quote": {Platform: "tpm", Format: "tpm2/quote", Aux: map[string][]byte{"ak_public": {1}}, Blob: tpm2.Marshal(&tpm2.TPMSAttest{
			Magic: tpm2.TPMGeneratedValue, Type: tpm2.TPMSTAttestTime,
			Attested: tpm2.NewTPMUAttest(tpm2.TPMSTAttestTime, &tpm2.TPMSTimeAttestInfo{})})},
	} {
		if _, err := teeclaims.Derive(ev); !errors.Is(err, teeclaims.ErrEvidence) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzDerive: Derive never panics on any evidence bytes and returns nothing
// with an error.
func FuzzDerive(f *testing.F) {
	rd := reportData(f, 1)
	q := rd.QualifyingData()
	f.Add(uint8(2), tpmQuote(q[:], 1, make([]byte, 32)), []byte("ak"))
	f.Add(uint8(0), make([]byte, 1184), []byte{})
	f.Add(uint8(1), make([]byte, 1100), []byte{})
	f.Fuzz(func(t *testing.T, which uint8, blob, aux []byte) {
		platforms := []struct{ p, f string }{{"sev-snp", "sev-snp/attestation-report"}, {"tdx", "tdx/quote-v4"}, {"tpm", "tpm2/quote"}}
		p := platforms[int(which)%len(platforms)]
		ev := &evidence.Evidence{Platform: p.p, Format: p.f, Blob: blob, CertChain: [][]byte{aux}}
		if p.p == "tpm" {
			ev.CertChain = nil
			ev.Aux = map[string][]byte{"ak_public": aux}
		}
		c, err := teeclaims.Derive(ev)
		if err != nil {
			if c != nil {
				t.Fatal("claims returned with an error")
			}
			return
		}
		_ = teeclaims.CheckReportData(ev, c, rd)
	})
}

// DeriveWith uses the supplied certificate parser and derives what Derive
// derives; a parser failure refuses the evidence.
func TestDeriveWithParser(t *testing.T) {
	ev, want := simSNPClaims(t, 1)
	calls := 0
	parse := func(der []byte) (*x509.Certificate, error) { calls++; return x509.ParseCertificate(der) }
	got, err := teeclaims.DeriveWith(ev, teeclaims.Options{ParseCertificate: parse})
	if err != nil || !reflect.DeepEqual(got, want) || calls != len(ev.CertChain) {
		t.Fatalf("got %+v, %v after %d parses; want %+v", got, err, calls, want)
	}
	refuse := func([]byte) (*x509.Certificate, error) { return nil, errors.New("no") }
	if c, err := teeclaims.DeriveWith(ev, teeclaims.Options{ParseCertificate: refuse}); c != nil || !errors.Is(err, teeclaims.ErrEvidence) {
		t.Fatalf("refusing parser: %+v, %v", c, err)
	}
}

// DeriveWith from the caller's parse and report derives what Derive derives
// from the evidence, without parsing it (the parser is not called), and
// parses it when only one of the two is given.
func TestDeriveWithParsed(t *testing.T) {
	ev, want := simSNPClaims(t, 2)
	p, err := snpevidence.Parse(ev)
	if err != nil {
		t.Fatal(err)
	}
	r, err := abi.ReportToProto(p.Report)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	parse := func(der []byte) (*x509.Certificate, error) { calls++; return x509.ParseCertificate(der) }
	got, err := teeclaims.DeriveWith(ev, teeclaims.Options{ParseCertificate: parse, SEVSNP: p, SEVSNPReport: r})
	if err != nil || !reflect.DeepEqual(got, want) || calls != 0 {
		t.Fatalf("got %+v, %v after %d parses; want %+v and none", got, err, calls, want)
	}
	got, err = teeclaims.DeriveWith(ev, teeclaims.Options{ParseCertificate: parse, SEVSNP: p})
	if err != nil || !reflect.DeepEqual(got, want) || calls != len(ev.CertChain) {
		t.Fatalf("without the report: %+v, %v after %d parses", got, err, calls)
	}
}
