package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/attestfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/evidencedoc"
)

// scriptPath is packctl's testscript for verify; its files are fixtures
// made here with the real producer and the simulated platforms.
var scriptPath = filepath.Join("..", "cmd", "packctl", "testdata", "script", "verify_sim.txt")

const scriptHeader = `# packctl verify with attestations from the simulated SEV-SNP and TDX
# platforms (fixtures written by verify's TestVerifyScriptFixtures with
# -update). Exit codes: 0 verified, 1 usage,
# 2 rejected, 3 could not check, 4 refused by policy.

# Verified with the allowance, with a summary of what was and was not checked.
exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --bundle sev/bundle.json --audit sev/audit.jsonl --report report.json --policy policy.json --at 2026-06-01T12:00:00Z
stdout '^attestation clawea_att_'
stdout 'ok +envelope'
stdout 'ok +report-data'
stdout 'ok +tool-calls +2 tool_call'
stdout 'SKIPPED +revocation'
stdout '^admission policy: none$'
stdout '^VERIFIED \(SIMULATED'
! stderr .

exec packctl verify --attestation tdx/attestation.json --evidence tdx/evidence.jws --bundle tdx/bundle.json --audit tdx/audit.jsonl --policy policy.json --at 2026-06-01T12:00:00Z --json
stdout '"verdict": "verified"'
stdout '"exit_code": 0'
stdout '"platform": "tdx"'

# The CLI allowance works without a policy allowance; without either,
# simulated evidence is refused by policy (exit 4).
exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --policy strict.json --allow-simulated --allow-unchecked-revocation --at 2026-06-01T12:00:00Z
stdout '^VERIFIED'
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --policy strict.json --at 2026-06-01T12:00:00Z --json
stdout '"exit_code": 4'
stdout '"check": "policy/simulated"'
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --at 2026-06-01T12:00:00Z
stdout '^POLICY-REFUSED: policy/simulated'
stderr '^packctl: verify: refused by policy'

# Revocation required unless allowed: could not check (exit 3).
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --policy strict.json --allow-simulated --at 2026-06-01T12:00:00Z --json
stdout '"exit_code": 3'
stdout '"check": "platform/revocation"'

# Rejected (exit 2): a tampered envelope, evidence of another run, a bundle
# of another run, a tampered audit log.
! exec packctl verify --attestation sev/tampered.json --evidence sev/evidence.jws --policy policy.json --at 2026-06-01T12:00:00Z --json
stdout '"exit_code": 2'
stdout '"poh_code": "HASH_MISMATCH"'
! exec packctl verify --attestation sev/attestation.json --evidence tdx/evidence.jws --policy policy.json --at 2026-06-01T12:00:00Z
stdout 'FAILED +evidence-ref HASH_MISMATCH'
stdout '^REJECTED: evidence-ref HASH_MISMATCH'
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --bundle tdx/bundle.json --policy policy.json --at 2026-06-01T12:00:00Z
stdout '^REJECTED: bundle-linkage EVIDENCE_MISMATCH'
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --bundle sev/bundle.json --audit sev/audit-tampered.jsonl --policy policy.json --at 2026-06-01T12:00:00Z
stdout '^REJECTED: audit-log HASH_MISMATCH'

# Policy: a run admitted under no listed admission policy (here an
# attestation of a run under none) is refused by a policy that requires
# sensitive mode (exit 4); the message names the member and the value seen.
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --policy sensitive.json --at 2026-06-01T12:00:00Z
stdout '^POLICY-REFUSED: policy/admission-policy'
stderr 'the run.s admission policy none is not in admission_policy_hashes_b64u'

# Gateway receipts: a run whose model calls went through the attester's
# gateway verifies under require_gateway, its receipts checked against the
# attested record; a run without a gateway record is refused by that policy
# (exit 4); reordered receipts under a record that names them in another
# order are rejected (exit 2).
exec packctl verify --attestation gw/attestation.json --evidence gw/evidence.jws --bundle gw/bundle.json --policy gateway.json --at 2026-06-01T12:00:00Z
stdout 'ok +gateway-receipts +2 receipts signed by the attester'
stdout '^VERIFIED'
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --bundle sev/bundle.json --policy gateway.json --at 2026-06-01T12:00:00Z
stdout '^POLICY-REFUSED: policy/gateway'
stderr 'commits to no model gateway record and require_gateway is set'
! exec packctl verify --attestation gw/reordered-attestation.json --evidence gw/reordered-evidence.jws --bundle gw/reordered-bundle.json --policy gateway.json --at 2026-06-01T12:00:00Z --json
stdout '"exit_code": 2'
stdout '"check": "gateway-receipts"'
stdout '"poh_code": "EVIDENCE_MISMATCH"'

# Policy: another measurement is refused (exit 4).
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --policy other-measurement.json --at 2026-06-01T12:00:00Z
stdout '^POLICY-REFUSED: policy/measurement'

# An EAR signed with the operator's key.
exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --policy policy.json --at 2026-06-01T12:00:00Z --ear-key ear-key.pem --ear-out ear.jwt
stdout '^VERIFIED'
exists ear.jwt
exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --policy policy.json --at 2026-06-01T12:00:00Z --ear-key ear-key.pem
stdout '^eyJ'
! stdout VERIFIED

# Usage errors (exit 1) and unreadable files (exit 3).
! exec packctl verify --attestation sev/attestation.json
stderr 'usage: packctl verify'
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --policy bad-policy.json
stderr 'packctl: verify: invalid policy file: allow_simulation: unknown key'
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --ear-key bad-policy.json
stderr 'ear-key'
! exec packctl verify --attestation missing.json --evidence sev/evidence.jws
stderr 'no such file'
! exec packctl verify --attestation sev/attestation.json --evidence sev/evidence.jws --at yesterday
stderr 'RFC 3339'
exec packctl verify -h
stderr 'usage: packctl verify'

# Garbage is rejected, never a panic.
! exec packctl verify --attestation bad-policy.json --evidence sev/evidence.jws --json
stdout '"exit_code": 2'
`

// TestVerifyScriptFixtures checks that the fixtures embedded in packctl's
// verify script still verify; with -update it first rewrites the script
// from fresh attestations.
func TestVerifyScriptFixtures(t *testing.T) {
	if *update {
		writeScript(t)
	}
	files := scriptFixtures(t, scriptPath)
	pol, err := ParsePolicy(files["policy.json"])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sev", "tdx"} {
		o := Options{Now: fixedNow, AuditLog: files[p+"/audit.jsonl"]}
		ev := bytes.TrimSuffix(files[p+"/evidence.jws"], []byte("\n"))
		if _, err := Verify(files[p+"/attestation.json"], ev, files[p+"/bundle.json"], pol, o); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// scriptFixtures reads the files of a testscript archive by name.
func scriptFixtures(t *testing.T, path string) map[string][]byte {
	t.Helper()
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range ar.Files {
		files[f.Name] = f.Data
	}
	return files
}

func writeScript(t *testing.T) {
	sev := attest(t, simSEV(t, sim.Options{}), newRun(t))
	r2 := newRun(t)
	r2.RunID = "run_verify_002"
	tdx := attest(t, simTDX(t, fakeqe.Options{}), r2)
	pol := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true,
		Measurements: [][]byte{sev.measurement, tdx.measurement}}
	polJSON, err := pol.Encode()
	if err != nil {
		t.Fatal(err)
	}
	other := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true,
		Measurements: [][]byte{bytes.Repeat([]byte{7}, 48)}}
	otherJSON, err := other.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sensitive := *pol
	sensitive.AdmissionPolicyHashes, sensitive.RequireSensitive = []string{h("admission policy")}, true
	sensitiveJSON, err := sensitive.Encode()
	if err != nil {
		t.Fatal(err)
	}
	gwRun := gatewayRun(t)
	gwRun.RunID = "run_verify_003"
	gw := attest(t, simSEV(t, sim.Options{}), gwRun)
	gwPolicy := *pol
	gwPolicy.RequireGateway = true
	gwJSON, err := gwPolicy.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// An attestation of the gateway's record over a bundle whose receipts
	// are in another order: one the attester would refuse to sign.
	reordered := *gwRun
	reordered.EditReceipts = func(rs []json.RawMessage) []json.RawMessage { return []json.RawMessage{rs[1], rs[0]} }
	spec := forgeRun(t, simSEV(t, sim.Options{}), &reordered)
	rec := attestfixture.Input(t, &gwRun.Run, "", 0).Gateway
	spec.commitments = func(c *evidencedoc.Commitments) { c.Version, c.Gateway = evidencedoc.CommitmentsVersionV4, rec }
	forgedAtt, forgedEv := forge(t, spec)
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5e}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	nl := func(b []byte) []byte { return append(bytes.Clone(b), '\n') }
	ar := &txtar.Archive{Comment: []byte(scriptHeader)}
	add := func(name string, data []byte) { ar.Files = append(ar.Files, txtar.File{Name: name, Data: data}) }
	add("policy.json", nl(polJSON))
	add("other-measurement.json", nl(otherJSON))
	add("sensitive.json", nl(sensitiveJSON))
	add("gateway.json", nl(gwJSON))
	add("strict.json", []byte(`{"policy_version":"clawea.dev/verify-policy/v1","allow_any_measurement":true}`+"\n"))
	add("bad-policy.json", []byte(`{"policy_version":"clawea.dev/verify-policy/v1","allow_simulation":true}`+"\n"))
	add("report.json", nl(sev.report))
	add("ear-key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	for _, f := range []struct {
		dir string
		fx  *fixture
	}{{"sev", sev}, {"tdx", tdx}, {"gw", gw}} {
		// txtar ends every file with a newline; packctl verify strips one
		// trailing newline from the evidence file (a compact JWS has none).
		add(f.dir+"/attestation.json", nl(f.fx.att))
		add(f.dir+"/evidence.jws", f.fx.ev)
		add(f.dir+"/bundle.json", nl(f.fx.bundle))
		add(f.dir+"/audit.jsonl", f.fx.audit)
	}
	add("gw/reordered-attestation.json", nl(forgedAtt))
	add("gw/reordered-evidence.jws", forgedEv)
	add("gw/reordered-bundle.json", nl(spec.bundle))
	tampered := bytes.Replace(sev.att, []byte(`"run_id":"run_verify_001"`), []byte(`"run_id":"run_verify_00X"`), 1)
	add("sev/tampered.json", nl(tampered))
	add("sev/audit-tampered.jsonl", bytes.Replace(sev.audit, []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1))
	if err := os.WriteFile(scriptPath, txtar.Format(ar), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (evidence %s)", scriptPath, b64u.SHA256(sev.ev))
}
