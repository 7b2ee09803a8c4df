package verify

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/clawea/attester/enclave/sim"
)

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"policy_version":"clawea.dev/verify-policy/v1"}`))
	f.Add([]byte(`{"policy_version":"clawea.dev/verify-policy/v1","tdx_tcb_statuses":["OutOfDate","SWHardeningNeeded"],"tdx_allowed_advisory_ids":["INTEL-SA-00837"]}`))
	f.Add([]byte(`{"policy_version":"clawea.dev/verify-policy/v1","admission_policy_hashes_b64u":["47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"],"require_sensitive":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			if p != nil || !errors.Is(err, ErrPolicyFile) {
				t.Fatalf("error %v with policy %v", err, p)
			}
			return
		}
		enc, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		p2, err := ParsePolicy(enc)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", enc, err)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip changed the policy:\n%+v\n%+v", p, p2)
		}
		enc2, _ := p2.Encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %s vs %s", enc, enc2)
		}
	})
}

var fuzzPolicy = &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, AllowAnyMeasurement: true}

func FuzzVerify(f *testing.F) {
	f.Add([]byte("{}"), []byte("a.b.c"), []byte(nil))
	f.Fuzz(func(t *testing.T, att, ev, bundle []byte) {
		if len(bundle) == 0 {
			bundle = nil
		}
		res, err := Verify(att, ev, bundle, fuzzPolicy, Options{Now: fixedNow})
		if err != nil {
			if _, ok := errors.AsType[*Error](err); res != nil || !ok {
				t.Fatalf("error %v with result %v", err, res)
			}
			n := 0
			for _, c := range []error{ErrUsage, ErrRejected, ErrCannotCheck, ErrPolicy} {
				if errors.Is(err, c) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error %v has %d classes", err, n)
			}
			return
		}
		if res == nil || !res.Simulated || len(res.Platform) == 0 {
			t.Fatalf("verified without a simulated platform result: %+v", res)
		}
	})
}

// update makes the generators of this package rewrite their outputs from
// fresh fixtures: the fuzz seed corpora (TestWriteFuzzSeeds) and packctl's
// verify script (TestVerifyScriptFixtures):
//
//	go test ./verify -run 'TestWriteFuzzSeeds|TestVerifyScriptFixtures' -update
var update = flag.Bool("update", false, "rewrite testdata/fuzz seeds and packctl's verify script from fresh fixtures")

// TestWriteFuzzSeeds writes the seed corpora from fresh fixtures with
// -update; the fuzz targets replay them on every go test.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("generator: run with -update to rewrite testdata/fuzz seeds")
	}
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	pol, err := f.simPolicy().Encode()
	if err != nil {
		t.Fatal(err)
	}
	full := &Policy{
		AllowSimulated: true, Measurements: [][]byte{f.measurement}, MinSEVSNPTCB: 0x0300000000000001,
		MinTDXTeeTCBSVN: [16]byte{3, 1}, TDXTCBStatuses: []string{"UpToDate", "OutOfDate"},
		TrustedTPMAKs: [][]byte{append([]byte{0, 0x0b}, bytes.Repeat([]byte{1}, 32)...)}, TrustedAttesterDIDs: []string{did(attesterKey())},
		TrustedTemplates: map[string]string{"AGENTS.md": "sha256:" + hexSHA("a")}, TrustedRecipes: []Recipe{{ID: "openclaw-sig", Version: "1"}},
		ExpectedPromptHashB64u: f.run.PromptHash, ExpectedReportHashB64u: f.run.ReportHash, ExpectedGatePolicyHashB64u: h("gate policy"),
		ExpectedModel: &ModelIdentity{Provider: "anthropic", Model: "claude-opus-4-6", Revision: "r1"}, ReceiptSignerDIDs: []string{did(key(4))},
		RequireGateway: true,
	}
	fullJSON, err := full.Encode()
	if err != nil {
		t.Fatal(err)
	}
	write := func(target, name string, args ...[]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			fmt.Fprintf(&b, "[]byte(%q)\n", a)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("FuzzParsePolicy", "sim", pol)
	write("FuzzParsePolicy", "full", fullJSON)
	write("FuzzParsePolicy", "unknown-member", []byte(`{"policy_version":"clawea.dev/verify-policy/v1","allow_simulation":true}`))
	write("FuzzParsePolicy", "version-not-first", []byte(`{"allow_simulated":true,"policy_version":"clawea.dev/verify-policy/v1"}`))
	write("FuzzParsePolicy", "duplicate", []byte(`{"policy_version":"clawea.dev/verify-policy/v1","allow_simulated":true,"allow_simulated":false}`))
	write("FuzzVerify", "valid", f.att, f.ev, f.bundle)
	write("FuzzVerify", "valid-no-bundle", f.att, f.ev, nil)
	g := attest(t, simSEV(t, sim.Options{}), gatewayRun(t))
	write("FuzzVerify", "valid-gateway", g.att, g.ev, g.bundle)
	write("FuzzVerify", "swapped", f.ev, f.att, nil)
	write("FuzzVerify", "tampered-evidence", f.att, append(bytes.Clone(f.ev[:len(f.ev)-2]), 'A', 'A'), f.bundle)
}
