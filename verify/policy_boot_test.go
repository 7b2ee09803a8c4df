package verify

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestPolicyBootMembers: the boot-chain pins parse, round-trip, reach the
// platform policy, and malformed values are refused with their path.
func TestPolicyBootMembers(t *testing.T) {
	k := strings.Repeat("ab", 48)
	c := strings.Repeat("cd", 32)
	p := roundTripPolicy(t, policyHead+`"boot_firmware_hex":["`+k+`"],"boot_kernel_hex":["`+k+`","`+c+`"],"boot_command_line_hex":["`+c+`"],"boot_initrd_hex":["`+k+`"]}`)
	pp := p.Platform()
	if len(pp.BootFirmware) != 1 || len(pp.BootKernel) != 2 || len(pp.BootCommandLine) != 1 || len(pp.BootInitrd) != 1 || !bytes.Equal(pp.BootKernel[1], p.BootKernel[1]) {
		t.Fatalf("%+v", pp)
	}
	for in, path := range map[string]string{
		policyHead + `"boot_kernel_hex":["` + strings.ToUpper(k) + `"]}`: "$.boot_kernel_hex[0]",
		policyHead + `"boot_kernel_hex":["abcd"]}`:                       "$.boot_kernel_hex[0]",
		policyHead + `"boot_initrd_hex":["` + c + `","` + c + `"]}`:      "$.boot_initrd_hex[1]",
		policyHead + `"boot_firmware_hex":"` + c + `"}`:                  "$.boot_firmware_hex",
	} {
		wantPolicyRefused(t, in, path, nil)
	}
}

// TestPolicyTrustGCEAKCerts: the member parses, round-trips and reaches
// the platform options' source.
func TestPolicyTrustGCEAKCerts(t *testing.T) {
	p, err := ParsePolicy([]byte(policyHead + `"trust_gce_ak_certs":true}`))
	if err != nil || !p.TrustGCEAKCerts {
		t.Fatalf("%+v %v", p, err)
	}
	enc, err := p.Encode()
	if err != nil || !strings.Contains(string(enc), `"trust_gce_ak_certs":true`) {
		t.Fatalf("%s %v", enc, err)
	}
	if _, err := ParsePolicy([]byte(policyHead + `"trust_gce_ak_certs":"yes"}`)); !errors.Is(err, ErrPolicyFile) {
		t.Fatal(err)
	}
}
