package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/jsonobj"
)

// TestParseIdentityStrict: an identity document is read as strictly as every
// other document (STYLE 18): a case variant or a repeated key must not make
// packctl check another value than a strict reader would see.
func TestParseIdentityStrict(t *testing.T) {
	const good = `{"did":"did:key:z6Mk","pack_public_key":"k","key_attestation":"a.b.c","platform":"sev-snp","simulated":false,"identity_sealed":true}`
	id, err := parseIdentity([]byte(good))
	if err != nil {
		t.Fatalf("valid identity refused: %v", err)
	}
	if id.DID != "did:key:z6Mk" || id.PackPublicKey != "k" || id.KeyAttestation != "a.b.c" || id.Platform != "sev-snp" || id.Simulated || !id.IdentitySealed {
		t.Fatalf("identity read as %+v", id)
	}
	for name, doc := range map[string]string{
		"case variant":   strings.Replace(good, `"did":"did:key:z6Mk"`, `"did":"did:key:z6Mk","DID":"did:key:zOther"`, 1),
		"repeated key":   strings.Replace(good, `"pack_public_key":"k"`, `"pack_public_key":"k","pack_public_key":"other"`, 1),
		"missing member": strings.Replace(good, `,"identity_sealed":true`, ``, 1),
		"wrong type":     strings.Replace(good, `"simulated":false`, `"simulated":"false"`, 1),
		"trailing data":  good + `{}`,
	} {
		_, err := parseIdentity([]byte(doc))
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if _, ok := errors.AsType[*jsonobj.PathError](err); !ok {
			t.Errorf("%s: error %v is not a *jsonobj.PathError", name, err)
		}
	}
}
