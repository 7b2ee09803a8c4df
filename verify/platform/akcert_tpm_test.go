package platform

import (
	"context"
	"crypto/sha256"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/wire/tpmquote"
)

// gceLikeAKTemplate is a restricted ECC P-256 signing key template, as GCE
// writes at NV 0x01c10003 (its unique field differs from the tpm
// backend's own AK).
func gceLikeAKTemplate() tpm2.TPMTPublic {
	unique := sha256.Sum256([]byte("test gce ak"))
	return tpm2.TPMTPublic{
		Type: tpm2.TPMAlgECC, NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true, UserWithAuth: true, NoDA: true, Restricted: true, SignEncrypt: true},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme: tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgECDSA,
				Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256})},
			CurveID: tpm2.TPMECCNistP256, KDF: tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{X: tpm2.TPM2BECCParameter{Buffer: unique[:]}, Y: tpm2.TPM2BECCParameter{Buffer: []byte{}}}),
	}
}

// provisionGCEAK makes the swtpm at addr look like a GCE vTPM: the AK
// template at NV 0x01c10003 and, at 0x01c10002, the certificate ca issues
// for the key the template makes.
func provisionGCEAK(t *testing.T, addr string, ca *akCA) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tp := transport.FromReadWriter(conn)
	tmpl := gceLikeAKTemplate()
	rsp, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)}, InPublic: tpm2.New2B(tmpl)}.Execute(tp)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = tpm2.FlushContext{FlushHandle: rsp.ObjectHandle}.Execute(tp)
	ak, err := tpmquote.ParsePublic(rsp.OutPublic.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ak.CryptoPublicKey()
	if err != nil {
		t.Fatal(err)
	}
	writeNV(t, tp, 0x01c10003, tpm2.Marshal(tmpl))
	writeNV(t, tp, 0x01c10002, ca.issue(t, pub, time.Now().Add(time.Hour)))
}

func writeNV(t *testing.T, tp transport.TPM, idx uint32, data []byte) {
	t.Helper()
	owner := tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)}
	pub := tpm2.TPMSNVPublic{NVIndex: tpm2.TPMHandle(idx), NameAlg: tpm2.TPMAlgSHA256,
		Attributes: tpm2.TPMANV{OwnerWrite: true, OwnerRead: true, AuthRead: true, NoDA: true, NT: tpm2.TPMNTOrdinary}, DataSize: uint16(len(data))}
	if _, err := (tpm2.NVDefineSpace{AuthHandle: owner, PublicInfo: tpm2.New2B(pub)}).Execute(tp); err != nil {
		t.Fatalf("define 0x%08x: %v", idx, err)
	}
	name, err := tpm2.NVName(&pub)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 512 {
		end := min(off+512, len(data))
		_, err := tpm2.NVWrite{AuthHandle: owner, NVIndex: tpm2.NamedHandle{Handle: pub.NVIndex, Name: *name},
			Data: tpm2.TPM2BMaxNVBuffer{Buffer: data[off:end]}, Offset: uint16(off)}.Execute(tp)
		if err != nil {
			t.Fatalf("write 0x%08x: %v", idx, err)
		}
	}
}

// TestTPMGCEAKEndToEnd: the tpm backend with GCEAK quotes with the AK the
// NV template makes and carries its certificate; the verifier trusts the AK
// through that certificate alone.
func TestTPMGCEAKEndToEnd(t *testing.T) {
	in := swtpmtest.StartForTest(t)
	ca := newAKCA(t)
	provisionGCEAK(t, in.Addr, ca)
	tp, err := tpm.Open(context.Background(), tpm.Options{Address: in.Addr, GCEAK: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	rd := testRD(t, "gce ak")
	ev, err := tp.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Aux[tpmquote.AuxAKCert]) == 0 {
		t.Fatal("no ak_cert in the evidence")
	}
	pool := newPool(ca)
	res, err := Verify(ev, rd, Options{Now: time.Now, AllowSimulated: true, TPMAKCARoots: pool})
	if err != nil {
		t.Fatal(err)
	}
	if res.TPM.AKProvenance != akCertified || !strings.HasPrefix(res.RootID, rootIDSimTPMAKCert) {
		t.Fatalf("provenance %s root %s", res.TPM.AKProvenance, res.RootID)
	}
	// Without a trusted AK CA, the same evidence has no trusted AK.
	_, err = Verify(ev, rd, Options{Now: time.Now, AllowSimulated: true})
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, CheckTPMAK)

	// A TPM without the GCE indices cannot open with GCEAK.
	plain := swtpmtest.StartForTest(t)
	if _, err := tpm.Open(context.Background(), tpm.Options{Address: plain.Addr, GCEAK: true}); err == nil || !strings.Contains(err.Error(), "gce ak template") {
		t.Fatalf("no gce indices: %v", err)
	}
}
