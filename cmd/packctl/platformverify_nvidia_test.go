package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/verify/platform"
)

const hopperDir = "../../verify/platform/testdata/nvidia-hopper/"

// hopperNonce is the sample's requester nonce (its README).
const hopperNonce = "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"

// TestNVIDIAGPUFormat is the nvidia-hopper rows of the conformance table
// through the nvidia-gpu format: the sample verifies with and without its
// nonce; a changed byte, a wrong nonce, the root-only chain and a truncated
// chain are refused, each by its own check, with the exit code packctl
// verify uses for rejected evidence.
func TestNVIDIAGPUFormat(t *testing.T) {
	read := func(name string) []byte {
		return testfile.Read(t, hopperDir+name)
	}
	report := read("hopperAttestationReport.txt")
	case1 := read("hopper_cert_chain_case1.txt")
	nonce := testfile.Hex(t, hopperNonce)
	at := time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

	sum, checks, err := verifyNVIDIAGPURaw(report, nonce, case1, at)
	if err != nil {
		t.Fatal(err)
	}
	if sum != "nvidia gpu report (vbios 96.00.9f.00.01 driver 550.90.07)" || len(checks) < 5 {
		t.Fatalf("%q %q", sum, checks)
	}
	if _, checks, err = verifyNVIDIAGPURaw(report, nil, case1, at); err != nil || !bytes.Contains([]byte(checks[4]), []byte(hopperNonce)) {
		t.Fatalf("no nonce: %v %q", err, checks)
	}

	changed := bytes.Clone(report)
	// A hex digit inside measurement block 2 becomes another digit.
	changed[240] = '0'
	if report[240] == '0' {
		changed[240] = '1'
	}
	wrong := bytes.Clone(nonce)
	wrong[31] ^= 1
	blocks := bytes.SplitAfter(case1, []byte("-----END CERTIFICATE-----\n"))
	truncated := append(bytes.Clone(blocks[0]), blocks[len(blocks)-2]...) // leaf and root
	for _, tc := range []struct {
		name   string
		report []byte
		nonce  []byte
		certs  []byte
		check  string
		exit   int
	}{
		{"changed byte", changed, nonce, case1, "signature", exitRejected},
		{"wrong nonce", report, wrong, case1, "report-data", exitRejected},
		{"case2 root only", report, nonce, read("hopper_cert_chain_case2.txt"), "chain", exitRejected},
		{"truncated chain", report, nonce, truncated, "chain", exitRejected},
		{"signing certificate only", report, nonce, read("hopper_signing_cert.pem"), "chain", exitRejected},
		{"no certs", report, nonce, nil, "options", exitUsage},
		{"not hex", []byte("zz"), nonce, case1, "options", exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := verifyNVIDIAGPURaw(tc.report, tc.nonce, tc.certs, at)
			pe, ok := errors.AsType[*platform.Error](err)
			switch {
			case tc.exit == exitUsage && errors.Is(err, platform.ErrBadOptions):
			case !ok || pe.Check != tc.check || !errors.Is(err, platform.ErrRejected):
				t.Fatalf("got %v, want %s", err, tc.check)
			}
			t.Logf("refused: %v", err)
		})
	}
}
