package platform

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// TPM attestation-key certificates (docs/spec/platform-tpm.md, section
// 2.3): a certificate for the AK, issued by a CA the verifier trusts, read
// by the producer from the TPM's NV (Google Compute Engine writes its vTPM
// AK certificate at NV index 0x01c10002 for ECC, 0x01c10000 for RSA).

// Google's EK/AK CA root and its v3 intermediate, as go-tpm-tools embeds
// them (server/ca-certs/gcp_ek_ak_ca_root.crt and
// gcp_ek_ak_ca_intermediate_v3.crt, v0.4.10, Apache-2.0); a test checks that
// they are the same bytes.
var (
	//go:embed gce_ek_ak_ca_root.der
	gceAKRootDER []byte
	//go:embed gce_ek_ak_ca_intermediate_v3.der
	gceAKIntermediateDER []byte
)

// Pins of the embedded Google certificates (SHA-256 of the DER).
const (
	gceAKRootSHA256         = "594759594b9b61524f6c8ef668f7177f7b9066bc0674f2f49fe9e052be78beb2"
	gceAKIntermediateSHA256 = "c84de8116dfaf5a908f21e810487791f5437e206d00ad8025050cca6bd2ff627"
)

// rootIDTPMAKCert prefixes the RootID of an AK trusted by its certificate:
// "tpm-ak-cert:" || hex(SHA-256(root DER)) || ":" || hex(AK Name).
const (
	rootIDTPMAKCert    = "tpm-ak-cert:"
	rootIDSimTPMAKCert = "sim-tpm-ak-cert:"
)

// akCertified is TPMClaims.AKProvenance for an AK trusted by its
// certificate.
const akCertified = "ak-certified"

// maxAKCert bounds the AK certificate.
const maxAKCert = tpmquote.MaxCertSize

// oidSubjectAltName is left unhandled by crypto/x509 when it holds only
// directory names, as Google's AK certificates do.
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

type gceAKRoots struct {
	root  *x509.Certificate
	roots *x509.CertPool
	inter *x509.CertPool
}

var gceRoots = sync.OnceValues(func() (*gceAKRoots, error) {
	parse := func(der []byte, pin string) (*x509.Certificate, error) {
		if sum := sha256.Sum256(der); hex.EncodeToString(sum[:]) != pin {
			return nil, errors.New("gce ak ca: fingerprint mismatch")
		}
		return x509.ParseCertificate(der)
	}
	root, err := parse(gceAKRootDER, gceAKRootSHA256)
	if err != nil {
		return nil, err
	}
	inter, err := parse(gceAKIntermediateDER, gceAKIntermediateSHA256)
	if err != nil {
		return nil, err
	}
	g := &gceAKRoots{root: root, roots: x509.NewCertPool(), inter: x509.NewCertPool()}
	g.roots.AddCert(root)
	g.inter.AddCert(inter)
	return g, nil
})

// certifiedAK is an AK whose certificate verified.
type certifiedAK struct {
	name   []byte
	rootID string
}

// akFromCert verifies the evidence's AK certificate (Aux "ak_cert"), when
// there is one and the options trust a CA for it: the certificate's key is
// the AK's, and it chains at now to Google's embedded EK/AK root
// (Options.TrustGCEAKCerts, evidence not simulated) or to one of
// Options.TPMAKCARoots. It returns nil when nothing is trusted this way.
func akFromCert(ev *evidence.Evidence, now time.Time, opts *Options) (*certifiedAK, error) {
	der, ok := ev.Aux[tpmquote.AuxAKCert]
	if !ok {
		return nil, nil
	}
	gce := opts.TrustGCEAKCerts && !ev.Simulated
	if !gce && opts.TPMAKCARoots == nil {
		return nil, nil
	}
	if len(der) > maxAKCert {
		return nil, rejected(checkTPMAK, fmt.Errorf("ak certificate is %d bytes, limit %d", len(der), maxAKCert))
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, rejected(checkTPMAK, fmt.Errorf("ak certificate: %v", err))
	}
	ak, err := tpmquote.ParsePublic(ev.Aux[tpmquote.AuxAKPublic])
	if err != nil {
		return nil, rejected(checkParse, fmt.Errorf("ak public: %w", err))
	}
	pub, err := ak.CryptoPublicKey()
	if err != nil {
		return nil, rejected(checkParse, fmt.Errorf("ak public: %w", err))
	}
	if k, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(pub) {
		return nil, rejected(checkTPMAK, errors.New("the ak certificate certifies another key"))
	}
	var exts []asn1.ObjectIdentifier
	for _, e := range cert.UnhandledCriticalExtensions {
		if !e.Equal(oidSubjectAltName) {
			exts = append(exts, e)
		}
	}
	c := *cert
	c.UnhandledCriticalExtensions = exts
	var tries []*x509.CertPool
	var inter *x509.CertPool
	if gce {
		g, err := gceRoots()
		if err != nil {
			return nil, cannotCheck(checkRoot, err)
		}
		tries, inter = append(tries, g.roots), g.inter
	}
	if opts.TPMAKCARoots != nil {
		tries = append(tries, opts.TPMAKCARoots)
	}
	var lastErr error
	for _, roots := range tries {
		chains, err := c.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			lastErr = err
			continue
		}
		root := chains[0][len(chains[0])-1]
		sum := sha256.Sum256(root.Raw)
		return &certifiedAK{name: ak.Name(), rootID: pick(ev.Simulated, rootIDSimTPMAKCert, rootIDTPMAKCert) + hex.EncodeToString(sum[:]) + ":" + hex.EncodeToString(ak.Name())}, nil
	}
	return nil, rejected(checkTPMAK, fmt.Errorf("%w: %w: ak certificate: %v", ErrUntrustedRoot, tpmquote.ErrUntrustedAK, lastErr))
}

// sameAK reports whether a and b are the same AK Name.
func sameAK(c *certifiedAK, name []byte) bool { return c != nil && bytes.Equal(c.name, name) }
