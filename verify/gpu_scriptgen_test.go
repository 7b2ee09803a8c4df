package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/schema/b64u"
)

// gpuScriptPath is packctl's testscript for attestations with GPU
// evidence; its files are fixtures made here with the real producer, the
// simulated SEV-SNP platform and the fake GPU.
var gpuScriptPath = filepath.Join("..", "cmd", "packctl", "testdata", "script", "verify_gpu.txt")

const gpuScriptHeader = `# packctl verify with an attestation carrying CPU (simulated SEV-SNP) and
# GPU (fake NVIDIA GPU, simulated device chain) evidence (fixtures written
# by verify's TestVerifyGPUScriptFixtures with -update).

# Both verify; the GPU item is checked to its (simulated) root.
exec packctl verify --attestation gpu/attestation.json --evidence gpu/evidence.jws --policy gpu-policy.json --at 2026-06-01T12:00:00Z
stdout 'evidence\[0\] sev-snp SIMULATED verified to sim-amd-ark-milan'
stdout 'evidence\[1\] nvidia-gpu SIMULATED verified to sim-nvidia-device-identity-ca'
stdout '^VERIFIED \(SIMULATED'
exec packctl verify --attestation gpu/attestation.json --evidence gpu/evidence.jws --policy gpu-policy.json --at 2026-06-01T12:00:00Z --ear-key ear-key.pem --ear-out ear.jwt
stdout '^VERIFIED'
exists ear.jwt

# A policy requiring GPU evidence refuses an attestation without it (exit 4).
! exec packctl verify --attestation cpu/attestation.json --evidence cpu/evidence.jws --policy gpu-policy.json --at 2026-06-01T12:00:00Z --json
stdout '"exit_code": 4'
stdout '"check": "policy/gpu"'
! exec packctl verify --attestation cpu/attestation.json --evidence cpu/evidence.jws --policy gpu-policy.json --at 2026-06-01T12:00:00Z
stdout '^POLICY-REFUSED: policy/gpu'
stderr 'require_gpu'

# A policy that pins only the CPU measurement refuses the GPU's (exit 4).
! exec packctl verify --attestation gpu/attestation.json --evidence gpu/evidence.jws --policy cpu-policy.json --at 2026-06-01T12:00:00Z
stdout '^POLICY-REFUSED: policy/measurement'
stderr 'gpu measurement'
`

// TestVerifyGPUScriptFixtures checks that the fixtures of packctl's GPU
// verify script still verify; with -update it first rewrites the script.
func TestVerifyGPUScriptFixtures(t *testing.T) {
	if *update {
		writeGPUScript(t)
	}
	files := scriptFixtures(t, gpuScriptPath)
	pol, err := ParsePolicy(files["gpu-policy.json"])
	if err != nil {
		t.Fatal(err)
	}
	ev := bytes.TrimSuffix(files["gpu/evidence.jws"], []byte("\n"))
	res, err := Verify(files["gpu/attestation.json"], ev, nil, pol, Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evidence) != 2 || res.Evidence[1].Platform != "nvidia-gpu" {
		t.Fatalf("evidence %+v", res.Evidence)
	}
}

func writeGPUScript(t *testing.T) {
	r := newRun(t)
	r.RunID = "run_verify_gpu_001"
	gpu := attestGPU(t, simSEV(t, sim.Options{}), r)
	cpu := attest(t, simSEV(t, sim.Options{}), newRun(t))
	any := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, AllowAnyMeasurement: true}
	res, err := Verify(gpu.att, gpu.ev, nil, any, Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	gm, err := b64u.Decode(res.Evidence[1].MeasurementB64u)
	if err != nil {
		t.Fatal(err)
	}
	cpuPol := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true,
		Measurements: [][]byte{gpu.measurement}}
	gpuPol := *cpuPol
	gpuPol.Measurements = append(gpuPol.Measurements, gm)
	gpuPol.RequireGPU = true
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5e}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	ar := &txtar.Archive{Comment: []byte(gpuScriptHeader)}
	add := func(name string, data []byte) { ar.Files = append(ar.Files, txtar.File{Name: name, Data: data}) }
	for name, p := range map[string]*Policy{"cpu-policy.json": cpuPol, "gpu-policy.json": &gpuPol} {
		b, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		add(name, append(b, '\n'))
	}
	add("ear-key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	for dir, fx := range map[string]*fixture{"gpu": gpu, "cpu": cpu} {
		add(dir+"/attestation.json", append(bytes.Clone(fx.att), '\n'))
		add(dir+"/evidence.jws", fx.ev)
	}
	slices.SortFunc(ar.Files, func(a, b txtar.File) int { return strings.Compare(a.Name, b.Name) })
	if err := os.WriteFile(gpuScriptPath, txtar.Format(ar), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", gpuScriptPath)
}
