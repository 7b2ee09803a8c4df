package main

import (
	"bytes"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/controltest"
	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
)

// ovmfCCEL is Trustee's CC event log of an OVMF direct boot: one boot
// application (the kernel), one command line, one initrd
// (verify/platform/testdata/trustee/NOTICE).
const ovmfCCEL = "../../verify/platform/testdata/trustee/tdx/CCEL_data_ovmf"

// simTDXPlatform is the simulated TDX platform as an attester's platform.
type simTDXPlatform struct{ *tdx.Simulated }

func (simTDXPlatform) Close() error { return nil }

// startTDXAttester starts an in-process simulated TDX attester whose RTMRs
// hold what the CC event log log replays to and which carries log, as a TD
// carries its CCEL; it returns the attester's public API URL.
func startTDXAttester(t *testing.T, log []byte) string {
	t.Helper()
	bc, err := platform.ReplayEventLog("ccel", log)
	if err != nil {
		t.Fatal(err)
	}
	td := fakeqe.DefaultTD()
	td.RTMR = [4][48]byte{}
	for i, reg := range bc.Registers {
		copy(td.RTMR[reg][:], bc.Values[i])
	}
	s, err := tdx.NewSimulated(fakeqe.Options{TD: &td, EventLog: log})
	if err != nil {
		t.Fatal(err)
	}
	d := controltest.Deps(t, attesterConfig(detect.Simulated), detect.Simulated, detect.Options{}, slog.New(slog.DiscardHandler))
	d.Platform = simTDXPlatform{s}
	url, _, _ := serveAttester(t, d)
	return url
}

// withLoaders returns the CC event log area with a boot application event
// (EV_EFI_BOOT_SERVICES_APPLICATION in RTMR1) for each of loaders inserted
// before the kernel's, as a boot through shim and GRUB logs them: copies of
// the kernel's event (one SHA-384 digest) with the loader's digest. The area keeps its length: the 0xff padding after the log is
// that much shorter.
func withLoaders(t *testing.T, area, kernel []byte, loaders ...[]byte) []byte {
	t.Helper()
	const head = 4 + 4 + 4 + 2 // MR index, event type, digest count, algorithm
	i := bytes.Index(area, kernel)
	if i < head || bytes.Contains(area[i+1:], kernel) {
		t.Fatal("the kernel digest is not once in the log")
	}
	start := i - head
	le := binary.LittleEndian
	// CC MR index 2 (RTMR1), EV_EFI_BOOT_SERVICES_APPLICATION, one SHA-384 digest.
	if le.Uint32(area[start:]) != 2 || le.Uint32(area[start+4:]) != 0x80000003 || le.Uint32(area[start+8:]) != 1 || le.Uint16(area[start+12:]) != 0x000c {
		t.Fatal("the kernel digest is not a one-digest RTMR1 boot application event")
	}
	end := i + len(kernel) + 4 + int(le.Uint32(area[i+len(kernel):]))
	var ins []byte
	for _, l := range loaders {
		ev := bytes.Clone(area[start:end])
		copy(ev[head:], l)
		ins = append(ins, ev...)
	}
	if !bytes.Equal(area[len(area)-len(ins):], bytes.Repeat([]byte{0xff}, len(ins))) {
		t.Fatal("no room for the loaders' events in the padding")
	}
	return slices.Concat(area[:start], ins, area[start:len(area)-len(ins)])
}

// policyInitTD runs policy init --pin measurement,boot against a simulated
// TD that carries the CC event log log and returns the policy it wrote,
// its summary and the attester's URL. The policy MUST admit the TD's key
// attestation (fetched again with another challenge), and the same policy
// with the last boot application alone (what policy init wrote before)
// MUST NOT: the earlier ones ran too.
func policyInitTD(t *testing.T, log []byte) (pol *verify.Policy, summary, url string) {
	t.Helper()
	url = startTDXAttester(t, log)
	out := filepath.Join(t.TempDir(), "policy.json")
	code, so, se := runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated", "--allow-unchecked-revocation",
		"--allow-unchecked-collateral", "--pin", "measurement,boot")
	if code != exitOK {
		t.Fatalf("policy init: exit %d\n%s%s", code, so, se)
	}
	_, pol = readPolicyFile(t, out)

	challenge := []byte("boot loaders")
	idRaw, err := httpGet(url + "/v1/identity?challenge=" + b64u.Encode(challenge))
	if err != nil {
		t.Fatal(err)
	}
	id, err := parseIdentity(idRaw)
	if err != nil {
		t.Fatal(err)
	}
	opts := verify.Options{Now: time.Now, AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true}
	if _, err := verify.VerifyKeyAttestation([]byte(id.KeyAttestation), challenge, pol, opts); err != nil {
		t.Fatalf("the policy does not admit the td: %v", err)
	}
	lastOnly := *pol
	lastOnly.BootKernel = pol.BootKernel[len(pol.BootKernel)-1:]
	if _, err := verify.VerifyKeyAttestation([]byte(id.KeyAttestation), challenge, &lastOnly, opts); !errors.Is(err, verify.ErrPolicy) {
		t.Fatalf("the last boot application alone: %v", err)
	}
	return pol, so, url
}

// TestPolicyInitBootLoaders: a TD that booted through shim and GRUB before
// its kernel has three boot applications in RTMR1 (GRUB's image measured
// twice here). A TDX policy pins a kind only when it lists every event of
// the kind (verify-platform section 8), so policy init --pin boot pins all
// of them, once each, and inspect lists them.
func TestPolicyInitBootLoaders(t *testing.T) {
	area := testfile.Read(t, ovmfCCEL)
	direct, err := platform.ReplayEventLog("ccel", area)
	if err != nil || len(direct.Kernels) != 1 {
		t.Fatalf("OVMF log: %v %x", err, direct)
	}
	kernel := direct.Kernels[0]
	shim, grub := sha512.Sum384([]byte("test shim image")), sha512.Sum384([]byte("test grub image"))
	pol, so, url := policyInitTD(t, withLoaders(t, area, kernel, shim[:], grub[:], grub[:]))
	if !slices.EqualFunc(pol.BootKernel, [][]byte{shim[:], grub[:], kernel}, bytes.Equal) || len(pol.BootFirmware) != 1 ||
		!slices.EqualFunc(pol.BootCommandLine, direct.CommandLines, bytes.Equal) || !slices.EqualFunc(pol.BootInitrd, direct.Initrds, bytes.Equal) {
		t.Fatalf("policy %+v", pol)
	}
	if !strings.Contains(so, fmt.Sprintf("pinned boot_kernel_hex: %x (evidence[0] ccel event log, 4 of 4, the last)\n", kernel)) ||
		!strings.Contains(so, fmt.Sprintf("pinned boot_kernel_hex: %x (evidence[0] ccel event log, 1 of 4)\n", shim)) {
		t.Fatalf("summary:\n%s", so)
	}

	// inspect lists the four boot applications in log order and names the
	// last.
	code, so, se := runCmd("inspect", savedIdentity(t, url))
	pre := "key_attestation.evidence[0].event_log."
	if code != exitOK || !strings.Contains(so, fmt.Sprintf("%sboot_kernel_hex[0]: %x\n%sboot_kernel_hex[1]: %x\n%sboot_kernel_hex[2]: %x\n%sboot_kernel_hex[3]: %x\n%sboot_kernel_last_hex: %x\n",
		pre, shim, pre, grub, pre, grub, pre, kernel, pre, kernel)) {
		t.Fatalf("inspect: exit %d\n%s%s", code, so, se)
	}
}

// TestPolicyInitBootRealCCEL: the same with a real TD's CC event log
// (go-tdx-guest's COS 113 boot: two boot applications in RTMR1, no Linux
// stub tags) in a simulated TD: both are pinned.
func TestPolicyInitBootRealCCEL(t *testing.T) {
	log := tdxtest.Read(t, "testing/testdata/ccel/ccel_data.dat")
	bc, err := platform.ReplayEventLog("ccel", log)
	if err != nil || len(bc.Kernels) != 2 {
		t.Fatalf("COS log: %v %x", err, bc)
	}
	pol, _, _ := policyInitTD(t, log)
	if !slices.EqualFunc(pol.BootKernel, bc.Kernels, bytes.Equal) || pol.BootCommandLine != nil || pol.BootInitrd != nil {
		t.Fatalf("policy %+v", pol)
	}
}
