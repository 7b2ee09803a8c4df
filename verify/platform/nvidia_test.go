package platform

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strconv"
	"testing"

	"github.com/clawea/attester/enclave/nvgpu"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/simroots"
)

// hopperNonce is the requester nonce of the H100 sample (its README).
const hopperNonce = "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"

func hopperFile(t testing.TB, name string) []byte {
	t.Helper()
	return testfile.Read(t, "testdata/nvidia-hopper/"+name)
}

func hopperReport(t testing.TB) []byte {
	t.Helper()
	return testfile.Hex(t, string(bytes.TrimSpace(hopperFile(t, "hopperAttestationReport.txt"))))
}

func pemChain(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		out = append(out, blk.Bytes)
	}
}

// TestNVIDIAHopperSample is the nvidia-hopper rows of the conformance table
// (docs/spec/verify-platform.md): the valid sample verifies, and each bad
// variant is refused with its own check and cause.
func TestNVIDIAHopperSample(t *testing.T) {
	report := hopperReport(t)
	chain := pemChain(t, hopperFile(t, "hopper_cert_chain_case1.txt"))
	if len(chain) != 5 {
		t.Fatalf("case1 has %d certificates", len(chain))
	}
	nonce := testfile.Hex(t, hopperNonce)

	res, err := verifyNVIDIAReport(report, chain, nonce, testNow)
	if err != nil {
		t.Fatal(err)
	}
	c := res.GPU
	if res.RootID != rootIDNVIDIA || res.Simulated || res.Revocation != StatusSkipped || c == nil {
		t.Fatalf("result %+v", res)
	}
	if hex.EncodeToString(c.FWID) != "f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d" ||
		c.DriverVersion != "550.90.07" || c.VBIOSVersion != "96.00.9f.00.01" || len(c.Measurements) != 64 ||
		hex.EncodeToString(c.Measurements[2]) != "8048dfd18fe229bf16eb9d30cca0f11a24dafe6eb731de1462984645a0b189b77c4e4e17de727a5e19e3d07de51da338" {
		t.Fatalf("claims %+v", c)
	}
	// Without a nonce: verified, and the nonce is reported.
	res, err = verifyNVIDIAReport(report, chain, nil, testNow)
	if err != nil || !bytes.Equal(res.GPU.Nonce[:], nonce) {
		t.Fatalf("no nonce: %v", err)
	}
	// The chain without its root verifies to the pinned root too.
	if _, err := verifyNVIDIAReport(report, chain[:4], nonce, testNow); err != nil {
		t.Fatalf("chain without root: %v", err)
	}

	changed := bytes.Clone(report)
	changed[120] ^= 1 // inside the value of measurement block 2
	wrongNonce := bytes.Clone(nonce)
	wrongNonce[0] ^= 1
	simRoot, err := simroots.NVIDIAGPURoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		report []byte
		chain  [][]byte
		nonce  []byte
		check  string
		cause  error
	}{
		{"changed byte", changed, chain, nonce, checkSignature, nil},
		{"wrong nonce", report, chain, wrongNonce, CheckReportData, ErrReportData},
		{"case2 root only", report, pemChain(t, hopperFile(t, "hopper_cert_chain_case2.txt")), nonce, checkChain, errGPUChainShort},
		{"truncated chain (no intermediates)", report, [][]byte{chain[0], chain[4]}, nonce, checkChain, nil},
		{"signing certificate alone", report, pemChain(t, hopperFile(t, "hopper_signing_cert.pem")), nonce, checkChain, nil},
		{"other root", report, [][]byte{chain[0], chain[1], chain[2], chain[3], simRoot.Raw}, nonce, checkRoot, ErrUntrustedRoot},
		{"intermediate as leaf", report, chain[1:], nonce, checkChain, nil},
		{"truncated report", report[:len(report)-1], chain, nonce, checkParse, nil},
		{"no chain", report, nil, nonce, checkChain, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := verifyNVIDIAReport(tc.report, tc.chain, tc.nonce, testNow)
			pe, ok := errors.AsType[*Error](err)
			if res != nil || !ok || !errors.Is(err, ErrRejected) || pe.Check != tc.check || (tc.cause != nil && !errors.Is(err, tc.cause)) {
				t.Fatalf("got %v, %v; want rejected by %s (%v)", res, err, tc.check, tc.cause)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestParseFWIDExtension(t *testing.T) {
	leaf := pemChain(t, hopperFile(t, "hopper_signing_cert.pem"))
	if len(leaf) != 1 {
		t.Fatal("signing cert")
	}
	for _, bad := range [][]byte{nil, {0x30, 0x00}, {0x04, 0x00}, testfile.Hex(t, "3005300306012a")} {
		if _, err := parseFWIDExtension(bad); err == nil {
			t.Fatalf("%x accepted", bad)
		}
	}
}

// TestNVIDIASimulated runs the real verifier on the fake GPU's evidence
// through Verify, bound to REPORT_DATA, and the GPU policy on the result.
func TestNVIDIASimulated(t *testing.T) {
	g, err := nvgpu.NewSimulated()
	if err != nil {
		t.Fatal(err)
	}
	rd := testRD(t, "gpu")
	ev := quote(t, g, nil, rd)
	res := verifySim(t, ev, rd)
	if !res.Simulated || res.RootID != rootIDSimNVIDIA || res.ReportData != rd.Bytes() || res.GPU == nil || len(res.GPU.Measurements) == 0 {
		t.Fatalf("result %+v", res)
	}

	// The GPU relaxation alone accepts the unchecked GPU revocation.
	gpuOnly := Options{Now: fixedNow, AllowSimulated: true, AllowUncheckedGPURevocation: true}
	if _, err := Verify(ev, rd, gpuOnly); err != nil {
		t.Fatalf("AllowUncheckedGPURevocation: %v", err)
	}

	// Refusals, each with its class and check.
	noRevocation := simOpts()
	noRevocation.AllowUncheckedRevocation = false
	tampered := *ev
	tampered.Blob = bytes.Clone(ev.Blob)
	tampered.Blob[60] ^= 1
	realClaims := *ev
	realClaims.Simulated = false
	otherChain := *ev
	otherChain.CertChain = pemChain(t, hopperFile(t, "hopper_cert_chain_case1.txt"))
	for _, tc := range []struct {
		name  string
		ev    *evidence.Evidence
		rd    evidence.ReportData
		opts  Options
		class error
		check string
	}{
		{"simulation not allowed", ev, rd, Options{Now: fixedNow, AllowUncheckedRevocation: true}, ErrRejected, CheckSimulated},
		{"no revocation data", ev, rd, noRevocation, ErrCannotCheck, checkRevocation},
		{"other run", ev, testRD(t, "other run"), simOpts(), ErrRejected, CheckReportData},
		{"changed byte", &tampered, rd, simOpts(), ErrRejected, checkSignature},
		{"claims to be real", &realClaims, rd, simOpts(), ErrRejected, checkRoot},
		{"real chain, simulated report", &otherChain, rd, simOpts(), ErrRejected, checkRoot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Verify(tc.ev, tc.rd, tc.opts)
			pe, ok := errors.AsType[*Error](err)
			if res != nil || !ok || !errors.Is(err, tc.class) || pe.Check != tc.check {
				t.Fatalf("got %v, %v; want %v at %s", res, err, tc.class, tc.check)
			}
		})
	}

	// Policy: nothing pinned refuses; the digest or the pinned indices pass;
	// a wrong pinned value or a missing index refuses.
	if err := CheckPolicy(res, Policy{}); !errors.Is(err, ErrPolicy) {
		t.Fatalf("empty policy: %v", err)
	}
	if err := CheckPolicy(res, Policy{Measurements: [][]byte{res.Measurement}}); err != nil {
		t.Fatal(err)
	}
	if err := CheckPolicy(res, Policy{GPUMeasurements: map[int][]byte{1: res.GPU.Measurements[1], 8: res.GPU.Measurements[8]}}); err != nil {
		t.Fatal(err)
	}
	for _, pins := range []map[int][]byte{{1: res.GPU.Measurements[2]}, {9: res.GPU.Measurements[1]}} {
		if err := CheckPolicy(res, Policy{GPUMeasurements: pins}); !errors.Is(err, ErrPolicy) {
			t.Fatalf("pins %v: %v", pins, err)
		}
	}
}

// FuzzParseFWIDExtension: the FWID extension parser never panics and
// returns only a 48-byte digest.
func FuzzParseFWIDExtension(f *testing.F) {
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		fw, err := parseFWIDExtension(b)
		if err == nil && len(fw) != 48 {
			t.Fatalf("%d-byte fwid accepted", len(fw))
		}
		if err != nil && fw != nil {
			t.Fatal("fwid returned with an error")
		}
	})
}

// TestNVIDIAHopperClaims compares what the verifier extracts from the H100
// sample with what another verifier extracted (the sample's claims file):
// every measurement, the FWID and the driver and VBIOS versions.
func TestNVIDIAHopperClaims(t *testing.T) {
	var claims struct {
		Config struct {
			DriverVersion string `json:"driver_version"`
			FWID          string `json:"fwid"`
			VBIOSVersion  string `json:"vbios_version"`
		} `json:"config"`
		Measurements map[string]string `json:"measurements"`
	}
	if err := json.Unmarshal(hopperFile(t, "hopperAttestationReport-claims.txt"), &claims); err != nil {
		t.Fatal(err)
	}
	res, err := verifyNVIDIAReport(hopperReport(t), pemChain(t, hopperFile(t, "hopper_cert_chain_case1.txt")), testfile.Hex(t, hopperNonce), testNow)
	if err != nil {
		t.Fatal(err)
	}
	g := res.GPU
	if g.DriverVersion != claims.Config.DriverVersion || g.VBIOSVersion != claims.Config.VBIOSVersion || hex.EncodeToString(g.FWID) != claims.Config.FWID {
		t.Fatalf("config: %+v, claims %+v", g, claims.Config)
	}
	if len(claims.Measurements) != len(g.Measurements) {
		t.Fatalf("%d measurements, claims have %d", len(g.Measurements), len(claims.Measurements))
	}
	for k, want := range claims.Measurements {
		i, err := strconv.Atoi(k)
		if err != nil || hex.EncodeToString(g.Measurements[i]) != want {
			t.Errorf("measurement %s: %x, claims %s", k, g.Measurements[i], want)
		}
	}
}
