package tpm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/wire/tpmquote"
)

// Sealing limits and labels (docs/spec/platform-tpm.md, "Sealing").
const (
	// sealedBlobVersion is the version label every sealed blob starts with,
	// followed by one 0x00 byte.
	sealedBlobVersion = "clawea.dev/attester/v1/tpm-seal"
	// sealLabelDomain separates the sealed object's auth value derivation.
	sealLabelDomain = "clawea.dev/attester/v1/tpm-seal/label"

	maxSealSecret  = 128 // MAX_SYM_DATA for a TPM sealed data object
	maxSealLabel   = 255
	maxSealedBlob  = 4096
	maxSealedPart  = 1024
	sealNonceBytes = 16
)

// Sealing errors.
var (
	// errUnsealDenied: the TPM refused to unseal (PCR policy or label).
	errUnsealDenied = errors.New("tpm: unseal denied")
	// errPCRPolicy: the PCR values differ from those at sealing time. It
	// is returned together with errUnsealDenied.
	errPCRPolicy = errors.New("tpm: pcr policy not satisfied")
	// errSealLabel: the label differs from the one used to seal. It is
	// returned together with errUnsealDenied.
	errSealLabel = errors.New("tpm: wrong seal label")
	// errSealedBlob: the blob is malformed or of an unknown version.
	errSealedBlob = errors.New("tpm: malformed sealed blob")
	// errSealInput: label or secret empty or too long.
	errSealInput = errors.New("tpm: invalid seal input")
	// errShortBuffer: dst cannot hold the unsealed secret.
	errShortBuffer = errors.New("tpm: destination buffer too small")
)

// sealedBlob is the parsed sealed blob:
//
//	"clawea.dev/attester/v1/tpm-seal" || 0x00 ||
//	u8 n || n × u8 pcr index (ascending, 0..23) ||
//	u16be len || TPMT_PUBLIC of the sealed object ||
//	u16be len || TPM2B_PRIVATE contents
type sealedBlob struct {
	pcrs    []int
	public  []byte
	private []byte
}

func (b *sealedBlob) marshal() []byte {
	out := append([]byte(sealedBlobVersion), 0)
	out = append(out, byte(len(b.pcrs)))
	for _, p := range b.pcrs {
		out = append(out, byte(p))
	}
	out = binary.BigEndian.AppendUint16(out, uint16(len(b.public)))
	out = append(out, b.public...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(b.private)))
	return append(out, b.private...)
}

// parseSealedBlob parses strictly: known version, ascending in-range PCRs,
// bounded parts, no trailing bytes. What it accepts re-encodes identically.
func parseSealedBlob(b []byte) (*sealedBlob, error) {
	if len(b) > maxSealedBlob {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errSealedBlob, len(b), maxSealedBlob)
	}
	hdr := append([]byte(sealedBlobVersion), 0)
	if len(b) < len(hdr) || string(b[:len(hdr)]) != string(hdr) {
		return nil, fmt.Errorf("%w: unknown version", errSealedBlob)
	}
	b = b[len(hdr):]
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: truncated", errSealedBlob)
	}
	n := int(b[0])
	b = b[1:]
	if n == 0 || n > tpmquote.NumPCRs || len(b) < n {
		return nil, fmt.Errorf("%w: pcr selection", errSealedBlob)
	}
	out := &sealedBlob{pcrs: make([]int, n)}
	for i := range n {
		p := int(b[i])
		if p >= tpmquote.NumPCRs || (i > 0 && p <= out.pcrs[i-1]) {
			return nil, fmt.Errorf("%w: pcr selection", errSealedBlob)
		}
		out.pcrs[i] = p
	}
	b = b[n:]
	part := func(what string) []byte {
		if len(b) < 2 {
			b = nil
			return nil
		}
		l := int(binary.BigEndian.Uint16(b))
		if l == 0 || l > maxSealedPart || len(b) < 2+l {
			b = nil
			return nil
		}
		p := slices.Clone(b[2 : 2+l])
		b = b[2+l:]
		return p
	}
	out.public = part("public")
	out.private = part("private")
	if out.public == nil || out.private == nil {
		return nil, fmt.Errorf("%w: truncated or oversized part", errSealedBlob)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errSealedBlob, len(b))
	}
	return out, nil
}

// sealAuth derives the sealed object's auth value from label, so a blob only
// unseals under the label it was sealed with.
func sealAuth(label string) []byte {
	h := sha256.New()
	h.Write([]byte(sealLabelDomain))
	h.Write([]byte{0})
	h.Write([]byte(label))
	return h.Sum(nil)
}

func checkSealInput(label string, secretLen int) error {
	if label == "" || len(label) > maxSealLabel {
		return fmt.Errorf("%w: label must be 1..%d bytes", errSealInput, maxSealLabel)
	}
	if secretLen == 0 || secretLen > maxSealSecret {
		return fmt.Errorf("%w: secret must be 1..%d bytes", errSealInput, maxSealSecret)
	}
	return nil
}

// createSRK creates the TCG reference ECC P-256 storage root key in the owner
// hierarchy (deterministic, so the same on every call). The caller flushes it.
func (t *TPM) createSRK() (tpm2.NamedHandle, tpm2.TPMTPublic, error) {
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tpm2.ECCSRKTemplate),
	}.Execute(t.tp)
	if err != nil {
		return tpm2.NamedHandle{}, tpm2.TPMTPublic{}, fmt.Errorf("tpm: create srk: %w", err)
	}
	h := tpm2.NamedHandle{Handle: rsp.ObjectHandle, Name: rsp.Name}
	pub, err := rsp.OutPublic.Contents()
	if err != nil {
		t.flush(h.Handle)
		return tpm2.NamedHandle{}, tpm2.TPMTPublic{}, fmt.Errorf("%w: srk public: %v", errUnexpectedTPM, err)
	}
	return h, *pub, nil
}

// runPCRPolicy runs PolicyPCR(pcrs, current values) then PolicyAuthValue on
// session sess.
func (t *TPM) runPCRPolicy(sess tpm2.Session, pcrs []int) error {
	if _, err := (tpm2.PolicyPCR{PolicySession: sess.Handle(), Pcrs: selection(pcrs)}).Execute(t.tp); err != nil {
		return fmt.Errorf("tpm: policy pcr: %w", err)
	}
	if _, err := (tpm2.PolicyAuthValue{PolicySession: sess.Handle()}).Execute(t.tp); err != nil {
		return fmt.Errorf("tpm: policy auth value: %w", err)
	}
	return nil
}

// SealPCR seals secret (1..128 bytes) to the current values of the
// configured PCRs and to label: a sealed data object under the owner
// hierarchy's SRK whose policy is PolicyPCR then PolicyAuthValue, with the
// auth value derived from label. The secret travels to the TPM encrypted in a
// session salted to the SRK. The blob is safe to store; only this TPM, with
// the same PCR values and label, unseals it.
func (t *TPM) SealPCR(ctx context.Context, label string, secret []byte) ([]byte, error) {
	if err := checkSealInput(label, len(secret)); err != nil {
		return nil, err
	}
	unlock, err := t.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	pcrs := slices.Clone(t.pcrs)

	// The policy digest over the current PCR values, from a trial session.
	trial, closeTrial, err := tpm2.PolicySession(t.tp, tpm2.TPMAlgSHA256, sealNonceBytes, tpm2.Trial())
	if err != nil {
		return nil, fmt.Errorf("tpm: trial session: %w", err)
	}
	err = t.runPCRPolicy(trial, pcrs)
	var digest []byte
	if err == nil {
		var rsp *tpm2.PolicyGetDigestResponse
		rsp, err = tpm2.PolicyGetDigest{PolicySession: trial.Handle()}.Execute(t.tp)
		if err == nil {
			digest = rsp.PolicyDigest.Buffer
		}
	}
	_ = closeTrial()
	if err != nil {
		return nil, fmt.Errorf("tpm: policy digest: %w", err)
	}

	srk, srkPub, err := t.createSRK()
	if err != nil {
		return nil, err
	}
	defer t.flush(srk.Handle)

	auth := sealAuth(label)
	data := slices.Clone(secret)
	defer clear(data)
	rsp, err := tpm2.Create{
		ParentHandle: tpm2.AuthHandle{
			Handle: srk.Handle,
			Name:   srk.Name,
			Auth: tpm2.HMAC(tpm2.TPMAlgSHA256, sealNonceBytes,
				tpm2.AESEncryption(128, tpm2.EncryptIn),
				tpm2.Salted(srk.Handle, srkPub)),
		},
		InSensitive: tpm2.TPM2BSensitiveCreate{Sensitive: &tpm2.TPMSSensitiveCreate{
			UserAuth: tpm2.TPM2BAuth{Buffer: auth},
			Data:     tpm2.NewTPMUSensitiveCreate(&tpm2.TPM2BSensitiveData{Buffer: data}),
		}},
		InPublic: tpm2.New2B(tpm2.TPMTPublic{
			Type:    tpm2.TPMAlgKeyedHash,
			NameAlg: tpm2.TPMAlgSHA256,
			ObjectAttributes: tpm2.TPMAObject{
				FixedTPM:    true,
				FixedParent: true,
				NoDA:        true,
				// UserWithAuth clear: the policy is the only way in.
				AdminWithPolicy: true,
			},
			AuthPolicy: tpm2.TPM2BDigest{Buffer: digest},
			Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgKeyedHash, &tpm2.TPMSKeyedHashParms{
				Scheme: tpm2.TPMTKeyedHashScheme{Scheme: tpm2.TPMAlgNull},
			}),
		}),
	}.Execute(t.tp)
	if err != nil {
		return nil, fmt.Errorf("tpm: create sealed object: %w", err)
	}
	blob := &sealedBlob{
		pcrs:    pcrs,
		public:  slices.Clone(rsp.OutPublic.Bytes()),
		private: slices.Clone(rsp.OutPrivate.Buffer),
	}
	if len(blob.public) > maxSealedPart || len(blob.private) > maxSealedPart {
		return nil, fmt.Errorf("%w: sealed object too large", errUnexpectedTPM)
	}
	return blob.marshal(), nil
}

// UnsealPCR unseals blob with label into dst and returns the secret's length.
// It fails with errUnsealDenied (and errPCRPolicy or errSealLabel) when the
// PCR values or the label differ from sealing time. The secret travels from
// the TPM encrypted in a session salted to the SRK; dst is the only copy left
// (intermediate buffers are zeroed).
func (t *TPM) UnsealPCR(ctx context.Context, label string, blob []byte, dst []byte) (int, error) {
	if label == "" || len(label) > maxSealLabel {
		return 0, fmt.Errorf("%w: label must be 1..%d bytes", errSealInput, maxSealLabel)
	}
	sb, err := parseSealedBlob(blob)
	if err != nil {
		return 0, err
	}
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](sb.public)
	if err != nil {
		return 0, fmt.Errorf("%w: public area: %v", errSealedBlob, err)
	}
	if pub.Type != tpm2.TPMAlgKeyedHash || pub.ObjectAttributes.UserWithAuth || len(pub.AuthPolicy.Buffer) != sha256.Size {
		return 0, fmt.Errorf("%w: not a policy-only sealed data object", errSealedBlob)
	}
	unlock, err := t.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()

	srk, srkPub, err := t.createSRK()
	if err != nil {
		return 0, err
	}
	defer t.flush(srk.Handle)
	load, err := tpm2.Load{
		ParentHandle: tpm2.AuthHandle{Handle: srk.Handle, Name: srk.Name, Auth: tpm2.PasswordAuth(nil)},
		InPrivate:    tpm2.TPM2BPrivate{Buffer: sb.private},
		InPublic:     tpm2.BytesAs2B[tpm2.TPMTPublic](sb.public),
	}.Execute(t.tp)
	if err != nil {
		return 0, fmt.Errorf("%w: load sealed object: %v", errSealedBlob, err)
	}
	defer t.flush(load.ObjectHandle)

	sess, closeSess, err := tpm2.PolicySession(t.tp, tpm2.TPMAlgSHA256, sealNonceBytes,
		tpm2.Auth(sealAuth(label)),
		tpm2.AESEncryption(128, tpm2.EncryptOut),
		tpm2.Salted(srk.Handle, srkPub))
	if err != nil {
		return 0, fmt.Errorf("tpm: policy session: %w", err)
	}
	defer func() { _ = closeSess() }()
	if err := t.runPCRPolicy(sess, sb.pcrs); err != nil {
		return 0, err
	}
	rsp, err := tpm2.Unseal{
		ItemHandle: tpm2.AuthHandle{Handle: load.ObjectHandle, Name: load.Name, Auth: sess},
	}.Execute(t.tp)
	switch {
	case errors.Is(err, tpm2.TPMRCPolicyFail):
		return 0, fmt.Errorf("%w: %w", errUnsealDenied, errPCRPolicy)
	case errors.Is(err, tpm2.TPMRCAuthFail), errors.Is(err, tpm2.TPMRCBadAuth):
		return 0, fmt.Errorf("%w: %w", errUnsealDenied, errSealLabel)
	case err != nil:
		return 0, fmt.Errorf("%w: %v", errUnsealDenied, err)
	}
	secret := rsp.OutData.Buffer
	defer clear(secret)
	if len(secret) > len(dst) {
		return 0, fmt.Errorf("%w: need %d bytes", errShortBuffer, len(secret))
	}
	return copy(dst, secret), nil
}
