package swtpmtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"fmt"
	"net"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// GCE's NV indices of its certified ECC AK (docs/spec/platform-tpm.md
// section 2.5).
const (
	gceAKTemplateECC = 0x01c10003
	gceAKCertECC     = 0x01c10002
)

// ProvisionGCEAK makes the swtpm look like a GCE vTPM: an ECC AK template
// at NV 0x01c10003 and, at 0x01c10002, the certificate issue returns for
// the public key that template makes in the endorsement hierarchy. Call it
// before another connection is open.
func (in *Instance) ProvisionGCEAK(issue func(ak crypto.PublicKey) ([]byte, error)) error {
	conn, err := net.Dial("tcp", in.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	tp := transport.FromReadWriter(conn)
	tmpl := gceAKTemplate()
	rsp, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)}, InPublic: tpm2.New2B(tmpl)}.Execute(tp)
	if err != nil {
		return err
	}
	_, _ = tpm2.FlushContext{FlushHandle: rsp.ObjectHandle}.Execute(tp)
	out, err := rsp.OutPublic.Contents()
	if err != nil {
		return err
	}
	pt, err := out.Unique.ECC()
	if err != nil {
		return err
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, pt.X.Buffer...), pt.Y.Buffer...))
	if err != nil {
		return err
	}
	cert, err := issue(pub)
	if err != nil {
		return err
	}
	if err := writeNV(tp, gceAKTemplateECC, tpm2.Marshal(tmpl)); err != nil {
		return err
	}
	return writeNV(tp, gceAKCertECC, cert)
}

// gceAKTemplate is a restricted ECC P-256 signing key template like GCE's.
func gceAKTemplate() tpm2.TPMTPublic {
	unique := sha256.Sum256([]byte("swtpmtest gce ak"))
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

// writeNV defines an owner NV index of len(data) bytes and writes data.
func writeNV(tp transport.TPM, idx uint32, data []byte) error {
	owner := tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)}
	pub := tpm2.TPMSNVPublic{NVIndex: tpm2.TPMHandle(idx), NameAlg: tpm2.TPMAlgSHA256,
		Attributes: tpm2.TPMANV{OwnerWrite: true, OwnerRead: true, AuthRead: true, NoDA: true, NT: tpm2.TPMNTOrdinary}, DataSize: uint16(len(data))}
	if _, err := (tpm2.NVDefineSpace{AuthHandle: owner, PublicInfo: tpm2.New2B(pub)}).Execute(tp); err != nil {
		return fmt.Errorf("define 0x%08x: %w", idx, err)
	}
	name, err := tpm2.NVName(&pub)
	if err != nil {
		return err
	}
	for off := 0; off < len(data); off += 512 {
		end := min(off+512, len(data))
		_, err := tpm2.NVWrite{AuthHandle: owner, NVIndex: tpm2.NamedHandle{Handle: pub.NVIndex, Name: *name},
			Data: tpm2.TPM2BMaxNVBuffer{Buffer: data[off:end]}, Offset: uint16(off)}.Execute(tp)
		if err != nil {
			return fmt.Errorf("write 0x%08x: %w", idx, err)
		}
	}
	return nil
}
