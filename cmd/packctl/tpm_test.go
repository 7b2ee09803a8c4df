package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/wire/tpmcred"
)

func writePEM(t *testing.T, path string, ders ...[]byte) {
	t.Helper()
	var b bytes.Buffer
	for _, d := range ders {
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: d}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func otherRootDER(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "swtpm-localca-rootca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestTPMActivateAndCheck runs "packctl tpm activate" against a swtpm with
// its swtpm_localca EK certificate, then "packctl tpm check" on the record.
func TestTPMActivateAndCheck(t *testing.T) {
	for _, tool := range []string{"swtpm", "swtpm_setup"} {
		if _, err := exec.LookPath(tool); err != nil {
			citest.SkipOrFail(t, "%s not on PATH", tool)
		}
	}
	in, err := swtpmtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Stop)
	root, inter, err := in.CA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rootsPEM, interPEM, otherPEM := filepath.Join(dir, "roots.pem"), filepath.Join(dir, "inter.pem"), filepath.Join(dir, "other.pem")
	writePEM(t, rootsPEM, root)
	writePEM(t, interPEM, inter)
	writePEM(t, otherPEM, otherRootDER(t))
	rec := filepath.Join(dir, "ak.cert")

	packctl := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(args, nil, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	// The chain does not reach another root: refused, nothing written.
	code, _, stderr := packctl("tpm", "activate", "--address", in.Addr, "--ek-roots", otherPEM, "--intermediate", interPEM, "--by", "ops", "-o", rec)
	if code != exitRejected {
		t.Fatalf("other root: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Fatal("record written although refused")
	}

	code, stdout, stderr := packctl("tpm", "activate", "--address", in.Addr, "--ek-roots", rootsPEM, "--intermediate", interPEM, "--by", "ops", "-o", rec, "--json")
	if code != exitOK {
		t.Fatalf("activate: exit %d: %s", code, stderr)
	}
	var sum tpmSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := tpmcred.ParseCertification(raw)
	if err != nil || parsed.ActivatedBy != "ops" || sum.AKNameHex == "" || sum.TPMModel != "swtpm" {
		t.Fatalf("record: %v %+v", err, sum)
	}

	// Never overwritten.
	if code, _, _ := packctl("tpm", "activate", "--address", in.Addr, "--ek-roots", rootsPEM, "--intermediate", interPEM, "--by", "ops", "-o", rec); code != exitCannot {
		t.Fatalf("overwrite: exit %d", code)
	}

	code, stdout, stderr = packctl("tpm", "check", "--ek-roots", rootsPEM, "--json", rec)
	if code != exitOK {
		t.Fatalf("check: exit %d: %s", code, stderr)
	}
	var got tpmSummary
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || got != sum {
		t.Fatalf("check summary %+v, activate %+v (%v)", got, sum, err)
	}
	// inspect recognises the record by its content and shows the AK Name,
	// unverified.
	code, stdout, stderr = packctl("inspect", rec)
	if code != exitOK || !strings.Contains(stdout, "kind: tpm-certification\n") || !strings.Contains(stdout, "ak_name_hex: "+sum.AKNameHex+"\n") ||
		!strings.Contains(stdout, "verified: false") || !strings.Contains(stdout, "activated_by: ops\n") {
		t.Fatalf("inspect record: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, _ := packctl("tpm", "check", "--ek-roots", otherPEM, rec); code != exitRejected {
		t.Fatalf("check other root: exit %d", code)
	}
	if err := os.WriteFile(rec+".bad", append(raw, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := packctl("tpm", "check", "--ek-roots", rootsPEM, rec+".bad"); code != exitRejected {
		t.Fatalf("check trailing byte: exit %d", code)
	}
	if code, _, _ := packctl("tpm", "activate", "--device", "/dev/x", "--address", in.Addr, "--ek-roots", rootsPEM, "--by", "ops", "-o", rec+"2"); code != exitUsage {
		t.Fatalf("device and address: exit %d", code)
	}
}
