package nvspdm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// sample is NVIDIA's H100 report (testdata/NOTICE).
func sample(t testing.TB) []byte {
	t.Helper()
	h := testfile.Read(t, "testdata/hopperAttestationReport.txt")
	return testfile.Hex(t, string(bytes.TrimSpace(h)))
}

func TestParseSample(t *testing.T) {
	b := sample(t)
	rep, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(rep.Nonce[:]); got != "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb" {
		t.Fatalf("nonce %s", got)
	}
	if len(rep.Measurements) != 64 || rep.Measurements[1].Index != 2 {
		t.Fatalf("%d measurements", len(rep.Measurements))
	}
	// Values the source's own claims file lists.
	if got := hex.EncodeToString(rep.Measurements[1].Value); got != "8048dfd18fe229bf16eb9d30cca0f11a24dafe6eb731de1462984645a0b189b77c4e4e17de727a5e19e3d07de51da338" {
		t.Fatalf("measurement 2 %s", got)
	}
	if got := hex.EncodeToString(rep.FWID()); got != "f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d" {
		t.Fatalf("fwid %s", got)
	}
	out, err := rep.Marshal()
	if err != nil || !bytes.Equal(out, b) {
		t.Fatalf("round trip: %v", err)
	}
	signed, err := rep.SignedPart()
	if err != nil || !bytes.Equal(signed, b[:len(b)-signatureSize]) {
		t.Fatalf("signed part: %v", err)
	}
}

// TestParseRefuses changes one thing at a time; every change is refused.
func TestParseRefuses(t *testing.T) {
	good := sample(t)
	rec := requestSize + responseHeader // first measurement block
	recLen := 3520
	opaque := requestSize + responseHeader + recLen + nonceSize + 2
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }},
		{"request version", func(b []byte) []byte { b[0] = 0x12; return b }},
		{"request code", func(b []byte) []byte { b[1] = 0xe1; return b }},
		{"no signature requested", func(b []byte) []byte { b[2] = 0; return b }},
		{"one measurement", func(b []byte) []byte { b[3] = 1; return b }},
		{"response version", func(b []byte) []byte { b[requestSize] = 0x10; return b }},
		{"response code", func(b []byte) []byte { b[requestSize+1] = 0x61; return b }},
		{"more blocks", func(b []byte) []byte { b[requestSize+4]++; return b }},
		{"fewer blocks", func(b []byte) []byte { b[requestSize+4]--; return b }},
		{"record length", func(b []byte) []byte { b[requestSize+5]++; return b }},
		{"block spec", func(b []byte) []byte { b[rec+1] = 2; return b }},
		{"block index zero", func(b []byte) []byte { b[rec] = 0; return b }},
		{"block index order", func(b []byte) []byte { b[rec] = 2; return b }},
		{"block size", func(b []byte) []byte { b[rec+2]++; return b }},
		{"dmtf size", func(b []byte) []byte { b[rec+5]--; return b }},
		{"opaque length", func(b []byte) []byte { b[opaque-2]++; return b }},
		{"opaque unknown type", func(b []byte) []byte { b[opaque] = 0x30; return b }},
		{"opaque duplicate type", func(b []byte) []byte { b[opaque] = 20; return b }},
		{"too large", func(b []byte) []byte { return make([]byte, maxReportBytes+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.edit(bytes.Clone(good))
			rep, err := Parse(b)
			if !errors.Is(err, errMalformed) || rep != nil {
				t.Fatalf("Parse = %v, %v; want errMalformed", rep, err)
			}
		})
	}
}

func TestOpaqueRequired(t *testing.T) {
	rep, err := Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, drop := range []uint16{opaqueDriverVersion, opaqueVBIOSVersion, OpaqueFWID} {
		r := *rep
		r.Opaque = nil
		for _, it := range rep.Opaque {
			if it.Type != drop {
				r.Opaque = append(r.Opaque, it)
			}
		}
		if _, err := r.Marshal(); !errors.Is(err, errMalformed) {
			t.Fatalf("without opaque type %d: %v", drop, err)
		}
	}
	r := *rep
	r.Signature = r.Signature[1:]
	if _, err := r.Marshal(); !errors.Is(err, errMalformed) {
		t.Fatalf("short signature: %v", err)
	}
}

// FuzzParse: whatever Parse accepts re-encodes to the identical bytes; on
// error nothing is returned.
func FuzzParse(f *testing.F) {
	f.Add(sample(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Parse(b)
		if err != nil {
			if rep != nil || !errors.Is(err, errMalformed) {
				t.Fatalf("error %v with a report", err)
			}
			return
		}
		out, err := rep.Marshal()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("accepted input does not re-encode: %v", err)
		}
	})
}
