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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/internal/testfile"
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

// tpmActivation is what a tpm activate test starts from: a manufactured
// swtpm and, in a temporary folder, PEM files of its EK root and
// intermediate and of another root its EK does not chain to, and the path
// of the record to write.
type tpmActivation struct {
	in                           *swtpmtest.Instance
	root, other                  []byte // DER
	rootsPEM, interPEM, otherPEM string
	rec                          string
}

func newTPMActivation(t *testing.T) *tpmActivation {
	t.Helper()
	a := &tpmActivation{in: swtpmtest.StartForTest(t)}
	root, inter, err := a.in.CA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a.root, a.other = root, otherRootDER(t)
	a.rootsPEM, a.interPEM, a.otherPEM = filepath.Join(dir, "roots.pem"), filepath.Join(dir, "inter.pem"), filepath.Join(dir, "other.pem")
	writePEM(t, a.rootsPEM, a.root)
	writePEM(t, a.interPEM, inter)
	writePEM(t, a.otherPEM, a.other)
	a.rec = filepath.Join(dir, "ak.cert")
	return a
}

// record decodes the summary that tpm activate --json printed on stdout and
// reads the record it wrote; err is the record's parse error.
func (a *tpmActivation) record(t *testing.T, stdout string) (tpmSummary, []byte, *tpmcred.Certification, error) {
	t.Helper()
	var sum tpmSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	raw := testfile.Read(t, a.rec)
	cert, err := tpmcred.ParseCertification(raw)
	return sum, raw, cert, err
}

// TestTPMActivateAndCheck runs "packctl tpm activate" against a swtpm with
// its swtpm_localca EK certificate, then "packctl tpm check" on the record.
func TestTPMActivateAndCheck(t *testing.T) {
	a := newTPMActivation(t)
	in, rootsPEM, interPEM, otherPEM, rec := a.in, a.rootsPEM, a.interPEM, a.otherPEM, a.rec

	// The chain does not reach another root: refused, nothing written.
	code, _, stderr := runCmd("tpm", "activate", "--address", in.Addr, "--ek-roots", otherPEM, "--intermediate", interPEM, "--by", "ops", "-o", rec)
	if code != exitRejected {
		t.Fatalf("other root: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Fatal("record written although refused")
	}

	code, stdout, stderr := runCmd("tpm", "activate", "--address", in.Addr, "--ek-roots", rootsPEM, "--intermediate", interPEM, "--by", "ops", "-o", rec, "--json")
	if code != exitOK {
		t.Fatalf("activate: exit %d: %s", code, stderr)
	}
	sum, raw, parsed, err := a.record(t, stdout)
	if err != nil || parsed.ActivatedBy != "ops" || sum.AKNameHex == "" || sum.TPMModel != "swtpm" {
		t.Fatalf("record: %v %+v", err, sum)
	}

	// Never overwritten.
	if code, _, _ := runCmd("tpm", "activate", "--address", in.Addr, "--ek-roots", rootsPEM, "--intermediate", interPEM, "--by", "ops", "-o", rec); code != exitCannot {
		t.Fatalf("overwrite: exit %d", code)
	}

	code, stdout, stderr = runCmd("tpm", "check", "--ek-roots", rootsPEM, "--json", rec)
	if code != exitOK {
		t.Fatalf("check: exit %d: %s", code, stderr)
	}
	var got tpmSummary
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || got != sum {
		t.Fatalf("check summary %+v, activate %+v (%v)", got, sum, err)
	}
	// inspect recognises the record by its content and shows the AK Name,
	// unverified.
	code, stdout, stderr = runCmd("inspect", rec)
	if code != exitOK || !strings.Contains(stdout, "kind: tpm-certification\n") || !strings.Contains(stdout, "ak_name_hex: "+sum.AKNameHex+"\n") ||
		!strings.Contains(stdout, "verified: false") || !strings.Contains(stdout, "activated_by: ops\n") {
		t.Fatalf("inspect record: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, _ := runCmd("tpm", "check", "--ek-roots", otherPEM, rec); code != exitRejected {
		t.Fatalf("check other root: exit %d", code)
	}
	if err := os.WriteFile(rec+".bad", append(raw, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCmd("tpm", "check", "--ek-roots", rootsPEM, rec+".bad"); code != exitRejected {
		t.Fatalf("check trailing byte: exit %d", code)
	}
	if code, _, _ := runCmd("tpm", "activate", "--device", "/dev/x", "--address", in.Addr, "--ek-roots", rootsPEM, "--by", "ops", "-o", rec+"2"); code != exitUsage {
		t.Fatalf("device and address: exit %d", code)
	}
}
